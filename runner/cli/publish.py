"""tftrain publish --run ID: the run's model as the next version in the repository's Releases."""

from __future__ import annotations

import fnmatch
import os

from runner.errors import PublishError
from runner.github import workflow
from runner.github.publish import publish
from runner.history.rundir import RunPaths
from runner.history.untrusted import BadRecord, read_json
from runner.paths import tftrain_home
from runner.settings import GitHubContext, resolve
from runner.storage.s3 import S3Target
from runner.targets.leftovers import open_history


def add_arguments(parser) -> None:
    parser.add_argument("--run", default="latest", help="run id (default: latest)")
    parser.add_argument("--force", action="store_true", help="publish although the checkout had uncommitted changes")
    parser.add_argument(
        "--when",
        choices=("auto", "always", "never"),
        default="always",
        help="auto: only for a pushed tag or a published release (the action's default)",
    )
    parser.add_argument(
        "--tag-pattern",  # left out: the input tag-pattern, else * (runner.settings)
        help="with --when auto: only pushed tags matching this glob (default *)",
    )


def should_publish(when: str, context: GitHubContext, tag_pattern: str = "*") -> str | None:
    """Why to publish now, or None."""
    if when == "always":
        return "publish: always"
    if when == "never":
        return None
    ref = context.ref
    if context.event_name == "push" and ref.startswith("refs/tags/"):
        tag = ref[len("refs/tags/") :]
        return f"tag {tag} pushed" if fnmatch.fnmatchcase(tag, tag_pattern) else None
    if context.event_name == "release" and context.payload.get("action") == "published":
        return "release published"
    return None


def run(args, logger) -> int:
    settings = resolve(os.environ, args)
    context, tag_pattern = settings.github, settings.inputs.tag_pattern
    reason = should_publish(args.when, context, tag_pattern)
    if reason is None:
        logger.info(
            f"not publishing (publish: {args.when}; not a pushed tag matching {tag_pattern!r} or a published release)"
        )
        return 0
    logger.info(f"publishing: {reason}")
    with open_history(
        tftrain_home(), logger.warning
    ) as store:  # the release carries run.json: a lost run's says Failed
        record_row = store.run(args.run)
    manifest, paths = RunPaths.of_run(record_row)
    try:
        record = read_json(paths.record)
    except (OSError, BadRecord) as exc:
        raise PublishError(
            f"run {record_row.run_id} cannot be published: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    if not isinstance(record, dict):
        raise PublishError(f"run {record_row.run_id} cannot be published: {paths.record} is not a run's record")
    with workflow.github_errors(PublishError):
        repo = workflow.client(context).get_repo(context.repository)
        published = publish(
            repo,
            manifest,
            paths,
            record,
            logger,
            force=args.force,
            s3=S3Target.of(settings),
            template=workflow.TagTemplate(settings.inputs.tag_template),
            run_url=context.run_url,
        )
    logger.outputs(
        {
            "release-tag": published.tag,
            "release-url": published.url,
            "release-checksums": str(paths.release_dir / "SHA256SUMS"),
        }
    )
    logger.step_summary(
        f"Published **[{published.tag}]({published.url})**: model, metrics, logs, model card, SHA256SUMS."
    )
    return 0
