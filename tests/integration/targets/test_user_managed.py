"""user_managed on the local target: the interpreter runs as it is, after a short process checked
that TensorFlow imports there; an interpreter without it is one line before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GATE_OFF

pytestmark = pytest.mark.integration

SCRIPT = "import sys\nprint('trained with', sys.executable)\n"


def manifest(root: Path, extra: str) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "train.py").write_text(SCRIPT)
    path = root / "tftrain.yml"
    path.write_text(
        "name: mine\nsource_directory: src\nentry_script: train.py\n" + GATE_OFF + "user_managed: true\n" + extra
    )
    return path


def test_an_interpreter_without_tensorflow_is_one_line(cli, home, tmp_path):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = cli("run", "-f", str(manifest(tmp_path, "python: bare/bin/python\n")))
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert (
        f"user_managed: {venv}/bin/python cannot import tensorflow (ModuleNotFoundError: No module named 'tensorflow')"
        in errors[0]
    )
    assert not (home / "runs" / "mine-1").exists()  # refused before the run was recorded


def test_an_interpreter_that_does_not_exist_is_one_line(cli, home, tmp_path):
    result = cli("run", "-f", str(manifest(tmp_path, "python: nowhere/bin/python\n")))
    assert result.returncode == 4
    assert f"python: {tmp_path}/nowhere/bin/python cannot be started (No such file or directory)" in result.stderr


def test_the_tests_interpreter_runs_as_it_is(cli, home, tmp_path):
    """No `python:`: tftrain's own interpreter (this suite's, which holds TensorFlow); no virtualenv."""
    result = cli("run", "-f", str(manifest(tmp_path, "")))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr
    assert "environment: user-managed interpreter" in result.stdout and "(TensorFlow 2." in result.stdout
    assert "building" not in result.stdout
    log = (home / "runs" / "mine-1" / "workdir" / "logs" / "0.log").read_text()
    assert "trained with" in log
