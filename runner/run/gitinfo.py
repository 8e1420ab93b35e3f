"""Lineage of a run: the commit, branch, tags and dirty state of the source's git checkout."""

from __future__ import annotations

import os
from pathlib import Path


def git_info(path: Path) -> dict:
    if not _in_checkout(path):  # GitPython takes longer to import than the script to start
        return {}
    try:
        import git
    except ImportError:  # GitPython needs the git executable
        return {}
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return {}
    try:
        commit = repo.head.commit.hexsha
    except ValueError:  # no commit yet
        return {"repo": repo.working_tree_dir, "commit": None, "branch": None, "tags": [], "dirty": True}
    try:
        branch = repo.active_branch.name
    except TypeError:  # detached HEAD (CI checkouts of tags and pull requests)
        branch = None
    tags = sorted(tag.name for tag in repo.tags if tag.commit.hexsha == commit)
    return {
        "repo": repo.working_tree_dir,
        "commit": commit,
        "branch": branch,
        "tags": tags,
        "dirty": repo.is_dirty(untracked_files=True),
    }


def _in_checkout(path: Path) -> bool:
    if os.environ.get("GIT_DIR"):
        return True
    path = Path(path).absolute()
    return any((folder / ".git").exists() for folder in (path, *path.parents))
