"""A failed pip step in the local environment names its error and keeps the full log."""

from __future__ import annotations

import sys

import pytest

from runner.errors import PreparingError


def test_a_failed_pip_step_names_its_error_and_keeps_the_full_log(tmp_path):
    import io

    from runner.environments.virtualenv import _call
    from runner.telemetry.logger import Logger

    script = (
        "import sys\nprint('\\x1b[31mCollecting nothing\\x1b[0m')\nprint('ERROR: No matching distribution for"
        " nothing')\nprint()\nsys.exit(1)\n"
    )
    log_path = tmp_path / "prepare.log"
    stream = io.StringIO()
    logger = Logger(stream)
    with pytest.raises(
        PreparingError,
        match=r"pip install failed \(exit 1\): ERROR: No matching distribution for nothing \(full output: ",
    ):
        _call([sys.executable, "-c", script], "pip install", logger, log_path)
    logger.flush()
    log = log_path.read_text()
    # the log keeps the output as it came
    assert log.startswith(f"$ {sys.executable} -c") and "\x1b[31mCollecting nothing" in log
    # the console: indented, no colours
    assert "  Collecting nothing\n  ERROR: No matching distribution" in stream.getvalue()
