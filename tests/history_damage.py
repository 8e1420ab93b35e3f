"""Ways to damage a run history's index (tftrain.db), shared by the store's unit and CLI tests."""

from __future__ import annotations

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
