"""Cross-key rules of image_registry, user_managed and python (see images.py)."""

from __future__ import annotations

from runner.manifest.document import Location
from runner.manifest.images import PACKAGE_KEYS
from runner.manifest.model import Manifest

Problem = tuple[Location, str]


def check_images(manifest: Manifest) -> list[Problem]:
    problems: list[Problem] = []
    registry = manifest.image_registry
    if registry is not None:
        if registry.password_secret not in manifest.secrets:
            known = ", ".join(manifest.secrets) or "none listed"
            problems.append(
                (
                    ("image_registry", "password_secret"),
                    (
                        f"{registry.password_secret!r} is not in secrets ({known}); list it there and set it in"
                        " tftrain's environment"
                    ),
                )
            )
        if not manifest.custom_docker_image:
            problems.append((("image_registry",), "needs custom_docker_image: the image to pull from that registry"))
    if manifest.custom_docker_image is not None:
        problems += _image_reference(manifest.custom_docker_image)
    if manifest.user_managed:
        for key in PACKAGE_KEYS:
            if getattr(manifest, key):
                problems.append(
                    ((key,), f"user_managed: true installs nothing; remove {key} or set user_managed: false")
                )
    elif manifest.python is not None:
        problems.append((("python",), "needs user_managed: true (else tftrain chooses the interpreter)"))
    return problems


def _image_reference(image: str) -> list[Problem]:
    from runner.serving.imageref import reference_problem, shown  # a manifest with an image alone

    problem = reference_problem(image)
    return [(("custom_docker_image",), f"{shown(image)}: {problem}")] if problem else []
