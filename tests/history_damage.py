"""Ways to damage a run history's index (tftrain.db), shared by the store's unit and CLI tests."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path


def truncated(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def sql(statement: str):
    def damage(db: Path) -> None:
        with sqlite3.connect(db) as connection:
            connection.execute(statement)
        connection.close()

    return damage


def directory(db: Path) -> None:
    db.unlink()
    db.mkdir()


def digest(directory: Path) -> str:
    """One hash of a directory's names and contents: a run or version directory left untouched."""
    sha = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        sha.update(str(path.relative_to(directory)).encode())
        if path.is_file():
            sha.update(path.read_bytes())
    return sha.hexdigest()
