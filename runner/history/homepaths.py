"""Where the index's rows keep their files: under the home, at a path relative to it (runs/ID,
models/NAME/vN), so that a copied, restored or moved TFTRAIN_HOME reads its own files. The
directory of a row is always the home's, made from the row's key; what the index holds is checked
against it, and an index made before (absolute paths) is migrated once."""

from __future__ import annotations

from pathlib import Path

from runner.errors import HistoryError

REBUILD_HINT = "run `tftrain doctor` to rebuild it from the run directories"
# PRAGMA user_version: 1 = runs.run_dir and models.path hold paths relative to the home (a copied,
# restored or moved home reads its own files); 0 = absolute ones, re-rooted by `migrate`
SCHEMA_VERSION = 1


def damaged(path: Path, reason: str) -> HistoryError:
    return HistoryError(f"{path} is damaged ({reason}): {REBUILD_HINT}")


def run_relative(run_id: str) -> tuple[str, ...]:
    return ("runs", run_id)


def version_relative(name: str, version: int) -> tuple[str, ...]:
    return ("models", name, f"v{version}")


def located(home: Path, stored: str | None, parts: tuple[str, ...], row: str) -> Path:
    """Where a row's directory is: always `home`/`relative` (the layout tftrain writes), never
    where the index says. `stored` is what the index holds: that relative path, or (an index made
    before paths were relative, or by an older tftrain) an absolute path ending in it, which is
    re-rooted to this home. Anything else names a directory outside the home: HistoryError."""
    if problem := _path_problem(home, stored, parts, row):
        raise damaged(home / "tftrain.db", problem)
    return home.joinpath(*parts)


def _path_problem(home: Path, stored: str | None, parts: tuple[str, ...], row: str) -> str | None:
    if any(part in ("", ".", "..") or "/" in part or "\0" in part for part in parts):
        return f"{row} names no directory of the home ({'/'.join(parts)[:200]!r})"
    relative = "/".join(parts)
    if stored is not None and stored != relative and not (stored.startswith("/") and stored.endswith("/" + relative)):
        return f"{row} is {stored[:200]!r}, outside {home}"
    return None


def _stored_paths(db):
    """(row, what the index holds, the parts of the path it must be) of every run and version."""
    for run_id, stored in db.execute("SELECT run_id, run_dir FROM runs"):
        yield f"runs.run_dir of {run_id}", stored, run_relative(run_id)
    for name, number, stored in db.execute("SELECT name, version, path FROM models"):
        yield f"models.path of {name}@v{number}", stored, version_relative(name, number)


def path_problems(db, home: Path, limit: int = 10) -> list[str]:
    """Rows whose directory is not where the home keeps it (doctor's look, and `migrate`'s)."""
    problems = [
        problem for row, stored, parts in _stored_paths(db) if (problem := _path_problem(home, stored, parts, row))
    ]
    return problems[:limit]


def migrate(db, home: Path) -> None:
    """An index older than SCHEMA_VERSION made current (inside the caller's transaction): absolute
    paths re-rooted as relative ones; one outside the home refuses the index (`tftrain doctor`)."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version >= SCHEMA_VERSION:
        return
    if problems := path_problems(db, home, limit=1):
        raise damaged(home / "tftrain.db", problems[0])
    db.execute("UPDATE runs SET run_dir = 'runs/' || run_id WHERE run_dir IS NOT NULL")
    db.execute("UPDATE models SET path = 'models/' || name || '/v' || version WHERE path IS NOT NULL")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
