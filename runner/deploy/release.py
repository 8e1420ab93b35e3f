"""The GitHub release that published a version links the image that serves it, by digest."""

from __future__ import annotations

from runner.errors import DeployError
from runner.serving.image import ModelImage
from runner.telemetry.logger import Logger

RELEASE_MARKER = "<!-- tftrain:serving-image -->"


def link_release(tag: str, image: ModelImage, digest: str, logger: Logger) -> None:
    """The release body gains (or updates) one line naming the image by digest: the release
    always points at the bytes that were smoke-tested, whatever happens to the tags later."""
    import os

    from runner.github import workflow
    from runner.settings import resolve

    line = (
        f"{RELEASE_MARKER}**Serving image:** `{image.repository}@{digest}` (tags `{image.version_tag}`,"
        f" `{image.content_tag}`)"
    )
    with workflow.github_errors(DeployError):
        release = (
            workflow.client(resolve(os.environ).github).get_repo(resolve(os.environ).github.repository).get_release(tag)
        )
        kept = [text for text in (release.body or "").splitlines() if not text.startswith(RELEASE_MARKER)]
        body = "\n".join([*kept, "", line]).strip("\n") + "\n"
        release.update_release(
            name=release.name or tag, message=body, draft=release.draft, prerelease=release.prerelease
        )
    logger.info(f"release {tag} links {image.repository}@{digest}")
