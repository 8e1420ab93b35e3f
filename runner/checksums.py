"""sha256 manifests of directories (SHA256SUMS format), streamed, never read whole."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sums_of(root: Path) -> dict[str, str]:
    """relative posix path → sha256 for every file below root (sorted)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {p.relative_to(root).as_posix(): sha256_file(p) for p in files}


def format_sums(sums: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sums.items())


def parse_sums(text: str) -> dict[str, str]:
    sums = {}
    for line in text.splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return sums


def mismatches(root: Path, expected: dict[str, str]) -> list[str]:
    """Files whose content differs from `expected`, or that are missing or unexpected."""
    actual = sums_of(root)
    problems = [f"{name}: missing" for name in expected if name not in actual]
    problems += [f"{name}: sha256 mismatch" for name in expected if name in actual and actual[name] != expected[name]]
    problems += [f"{name}: not in SHA256SUMS" for name in actual if name not in expected]
    return problems
