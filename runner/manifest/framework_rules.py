"""Warnings about how TensorFlow gets into the environment (load_manifest's warnings).

tftrain installs TensorFlow from framework_version with the release's tested set (runner/frameworks/curated.py).
A TensorFlow the user lists in pip_packages replaces it (the set is left out, so an unpinned one
is a warning); a patch other than the set's, or a release without a set, installs without it.
"""

from __future__ import annotations

import re

from runner.frameworks.releases import DEFAULT_VERSION, FRAMEWORKS
from runner.manifest.document import Location
from runner.manifest.model import Manifest

Problem = tuple[Location, str]
TENSORFLOW_NAMES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu")
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_EXACT = re.compile(r"===?\s*\d[\w.+!-]*")


def framework_warnings(manifest: Manifest) -> list[Problem]:
    if manifest.user_managed:  # tftrain installs nothing
        return []
    listed = _listed_tensorflow(manifest.pip_packages)
    if listed:
        return _unpinned(manifest, listed)
    return _without_set(manifest)


def _listed_tensorflow(packages: list[str]) -> list[tuple[int, str, str]]:
    """(index, name, version specifier) of each TensorFlow in pip_packages."""
    found = []
    for index, line in enumerate(packages):
        match = _REQUIREMENT.match(line.split(";")[0])
        if match and match[1].lower().replace("_", "-") in TENSORFLOW_NAMES:
            found.append((index, match[1], match[2].strip()))
    return found


def _unpinned(manifest: Manifest, listed: list[tuple[int, str, str]]) -> list[Problem]:
    release = manifest.framework_version or DEFAULT_VERSION
    from runner.frameworks.curated import constraint_set  # here: read from disk, only for a framework_version

    found = constraint_set(release)
    tested = ", its tested set" if found is not None and found.covers(release) else ""
    return [
        (
            ("pip_packages", index),
            (
                f"`{name}` is unpinned: pip installs the release the registry serves that day, not "
                f"framework_version ({release}{tested}); remove it (tftrain installs TensorFlow from "
                "framework_version) or pin an exact version with =="
            ),
        )
        for index, name, specifier in listed
        if not _EXACT.fullmatch(specifier)
    ]


def _without_set(manifest: Manifest) -> list[Problem]:
    version = manifest.framework_version
    if version is None or (manifest.use_docker and not manifest.custom_docker_image):
        return []  # the default release's set; an official image brings its own TensorFlow
    from runner.frameworks.curated import constraint_set, major_minor  # here: see _unpinned

    release, found = major_minor(version), constraint_set(version)
    if found is None:
        known = list(FRAMEWORKS)
        return [
            (
                ("framework_version",),
                (
                    f"TensorFlow {release} has no tested set (tftrain's releases: {known[0]} to {known[-1]}): "
                    "pip resolves its packages as the registry serves them"
                ),
            )
        ]
    if not found.covers(version):
        return [
            (
                ("framework_version",),
                (
                    f"{version} is not the patch of the tested {release} set ({found.tensorflow}): tftrain installs"
                    f" TensorFlow {version} without the set's pins; write '{release}' or '{found.tensorflow}' to use"
                    " the set"
                ),
            )
        ]
    return []
