"""What `tftrain` loads before the user's script starts: nothing it does not need then (the
startup bench, bench/startup.py, measures the time; this holds the line on what is imported)."""

from __future__ import annotations

import subprocess
import sys

LATE = ("rich", "docker", "github", "boto3", "tensorboard", "matplotlib", "git", "jinja2", "kubernetes")


def loaded_by(statement: str) -> list[str]:
    probe = f"import sys; {statement}; print(' '.join(m for m in {LATE!r} if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()


def test_version_loads_only_the_command_table():
    assert loaded_by("import runner.cli.main") == []
    assert loaded_by("import runner") == []


def test_run_loads_nothing_that_only_post_processing_or_other_targets_need():
    assert loaded_by("import runner.cli.run") == []
