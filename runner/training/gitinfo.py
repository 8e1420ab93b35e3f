"""Lineage of a run: the commit, branch, tags and dirty state of the source's git checkout.

Asked of the `git` executable (three short calls, while the training already runs); a folder
outside any checkout, a git that is missing or refuses the folder (safe.directory) gives {}."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# asked while the training runs, before supervise first looks: a hung git must not hold the run's clock
GIT_SECONDS = 20


def git_info(path: Path) -> dict:
    if not _in_checkout(path):
        return {}
    top = _git(path, "rev-parse", "--show-toplevel")
    status = _git(path, "status", "--porcelain=v2", "--branch", "--untracked-files=normal") if top else None
    if top is None or status is None:
        return {}
    headers = dict(line[2:].partition(" ")[::2] for line in status.splitlines() if line.startswith("# "))
    commit = headers.get("branch.oid")
    if commit in (None, "(initial)"):  # no commit yet
        return {"repo": top, "commit": None, "branch": None, "tags": [], "dirty": True}
    branch = headers.get("branch.head")
    tags = _git(path, "tag", "--points-at", "HEAD") or ""
    return {
        "repo": top,
        "commit": commit,
        "branch": (
            None if branch in (None, "(detached)") else branch
        ),  # detached: CI checkouts of tags and pull requests
        "tags": sorted(tags.split()),
        "dirty": any(line and not line.startswith("#") for line in status.splitlines()),
    }


def _git(path: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=path,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GIT_SECONDS,
            env={
                **os.environ,
                "GIT_OPTIONAL_LOCKS": "0",
                "LC_ALL": "C",
            },  # status must not take index.lock under a running git
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _in_checkout(path: Path) -> bool:
    if os.environ.get("GIT_DIR"):
        return True
    path = Path(path).absolute()
    return any((folder / ".git").exists() for folder in (path, *path.parents))
