"""What git tracks in this repository."""

from __future__ import annotations

import subprocess


def test_no_built_packages_are_tracked(repo):
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [name for name in tracked if name.endswith((".whl", ".tar.gz", ".egg"))] == []
