"""A version's scoring script in a GitHub release: the files registration keeps in scoring/ (the
script serving.json's "scoring" names, its sample request and the answer the gate recorded) travel
as one asset, scoring.tar.gz, packed and extracted by runner.history.archive, listed in SHA256SUMS.

Read back (`tftrain serve release:NAME@vN`), the archive is hostile input: it must match
SHA256SUMS, extract by the archive rules (regular files only, no links, `..` or absolute names)
under limits sized for three small files, hold exactly the names serving.json allows, and each file
must have the sha256 serving.json recorded for it. A refusal leaves no scoring/ behind.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from runner.errors import PublishError, RegistryError
from runner.history.archive import unpack
from runner.history.checksums import sha256_file
from runner.history.packing import pack
from runner.serving.scoring.script import recorded
from runner.settings import ArchiveLimits

SCORING_ASSET = "scoring.tar.gz"
SCORING_DIR = "scoring"
# the files beside the script, by the key of serving.json's "scoring" that holds their sha256
OPTIONAL = {"sample-request.json": "sample_request", "answer.json": "answer"}
MAX_BYTES = 64 << 20  # a script and two JSON documents: far more than any needs


def kept_files(scoring: dict) -> dict[str, str]:
    """name in scoring/ → the sha256 serving.json recorded for it: the script and, where recorded,
    its sample request and answer. ValueError for a script name that is no plain file name."""
    script = scoring.get("script")
    if (
        not isinstance(script, str)
        or script in ("", ".", "..")
        or "/" in script
        or "\\" in script
        or not script.isprintable()
        or script in OPTIONAL
    ):
        raise ValueError(f"serving.json's scoring.script {str(script)[:80]!r} is not a file name")
    files = {script: scoring.get("sha256")}
    files.update({name: scoring.get(key) for name, key in OPTIONAL.items() if scoring.get(key)})
    return files


def pack_scoring(serving_dir: Path, target: Path) -> str | None:
    """The run's serving/scoring/ files that serving.json names, packed as `target`; their sha256
    (None, and nothing written, for a version without a scoring script)."""
    scoring = recorded(serving_dir.parent) if serving_dir.name == "serving" else None
    if scoring is None:
        return None
    try:
        names = kept_files(scoring)
    except ValueError as exc:
        raise PublishError(f"{serving_dir / 'serving.json'}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="tftrain-scoring-") as tmp:
        for name in names:  # exactly what the gate kept and serving.json names, nothing else in the folder
            source = serving_dir / SCORING_DIR / name
            if not source.is_file() or source.is_symlink():
                raise PublishError(f"{source} is missing: the run's scoring script cannot be published")
            shutil.copyfile(source, Path(tmp) / name)
        return pack(Path(tmp), target)


def unpack_scoring(archive: Path, root: Path, scoring: dict, label: str, limits: ArchiveLimits) -> None:
    """Extract `archive` into root/scoring/ by the rules above; RegistryError (what the archive
    holds) or PublishError (what serving.json says of it) otherwise, with scoring/ removed."""
    try:
        expected = kept_files(scoring)
    except ValueError as exc:
        raise PublishError(f"{label}: {exc}") from None
    target = root / SCORING_DIR
    bounded = replace(
        limits, max_entries=min(limits.max_entries, len(expected) + 1), max_bytes=min(limits.max_bytes, MAX_BYTES)
    )
    unpack(archive, target, label=label, limits=bounded)
    try:
        _check(target, expected, label)
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise


def _check(target: Path, expected: dict[str, str], label: str) -> None:
    for entry in sorted(target.iterdir()):
        if entry.name not in expected or not entry.is_file():
            raise RegistryError(
                f"{label}: refusing {entry.name!r}: serving.json names {', '.join(sorted(expected))} and nothing else"
            )
    for name, digest in expected.items():
        path = target / name
        if not path.is_file():
            raise RegistryError(f"{label}: {name} is missing (serving.json names it)")
        if sha256_file(path) != digest:
            raise PublishError(f"{label}: {name} does not match the sha256 serving.json records for it")
