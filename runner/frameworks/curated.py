"""The curated TensorFlow sets: per release, pip constraints tested together on this project's
Python (runner/frameworks/constraints/tensorflow-2.18.txt …), written by scripts/refresh-frameworks
(refresh.py).

Environments install TensorFlow with `-c` the release's set, so a run resolves the packages that
passed the smoke test (runner/environments/smoke.py), not whatever the registry serves that day.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from runner.frameworks.releases import DEFAULT_VERSION

CONSTRAINTS_DIR = Path(__file__).with_name("constraints")
# What a set pins: TensorFlow (both names, one version), its Keras, and the packages whose drift
# breaks TensorFlow at import or at tf.summary time.
SET_PACKAGES = (
    "tensorflow-cpu",
    "tensorflow",
    "keras",
    "tf-keras",
    "numpy",
    "protobuf",
    "tensorboard",
    "tensorboard-data-server",
    "ml-dtypes",
)
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*$")


class ConstraintSet(NamedTuple):
    release: str  # major.minor
    path: Path
    text: str
    pins: tuple[tuple[str, str], ...]  # (normalised name, exact version)

    @property
    def tensorflow(self) -> str:
        return self.pin("tensorflow") or ""

    def pin(self, name: str) -> str | None:
        return dict(self.pins).get(normalise(name))

    def covers(self, framework_version: str | None) -> bool:
        """Whether the set can be applied to this framework_version: a release (2.18), or the
        patch the set pins (2.18.1); another patch (2.18.0) is the user's own choice."""
        wanted = framework_version or DEFAULT_VERSION
        return wanted.count(".") < 2 or wanted == self.tensorflow

    def constraints(self, leave_out: frozenset[str] = frozenset()) -> str:
        """The pins as a constraints file, less the packages the user names (theirs win)."""
        return "".join(f"{name}=={version}\n" for name, version in self.pins if name not in leave_out)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def major_minor(version: str | None) -> str:
    return ".".join((version or DEFAULT_VERSION).split(".")[:2])


def set_path(release: str) -> Path:
    return CONSTRAINTS_DIR / f"tensorflow-{release}.txt"


def released_sets() -> list[str]:
    """The releases with a set, oldest first: ['2.12', …, '2.21']."""
    releases = (path.stem.removeprefix("tensorflow-") for path in CONSTRAINTS_DIR.glob("tensorflow-*.txt"))
    return sorted(releases, key=lambda release: tuple(map(int, release.split("."))))


def constraint_set(framework_version: str | None) -> ConstraintSet | None:
    """The tested set of framework_version's release, or None where the project ships none."""
    release = major_minor(framework_version)
    path = set_path(release)
    if not path.is_file():
        return None
    return parse_set(release, path, path.read_text())


def parse_set(release: str, path: Path, text: str) -> ConstraintSet:
    pins = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _PIN.match(line)
        if not found:
            raise ValueError(f"{path}:{number}: not an exact pin (name==version): {line}")
        pins.append((normalise(found[1]), found[2]))
    return ConstraintSet(release, path, text, tuple(sorted(pins)))


def requirement_names(lines: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The package names that requirement lines (pip_packages, a requirements file) mention."""
    names = set()
    for line in lines:
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#")[0])
        if found and not line.lstrip().startswith("-"):
            names.add(normalise(found[1]))
    return frozenset(names)


def constraints_for(framework_version: str | None, user_lines: list[str] | tuple[str, ...] = ()) -> str | None:
    """The constraints an environment that installs TensorFlow from framework_version gets: the
    release's set less the packages the user lists; None where no set applies (no set for the
    release, or a patch other than the set's)."""
    found = constraint_set(framework_version)
    if found is None or not found.covers(framework_version):
        return None
    return found.constraints(requirement_names(user_lines))
