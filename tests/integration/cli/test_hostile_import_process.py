"""The hostile importer cases that once crashed or hung the interpreter itself (RecursionError in
ast, MemoryError, a 1 GB format width, a deep notebook), run as a user runs them: a real
`tftrain` process under a wall-clock limit, so a hang or a crash cannot hide in the test's own
process."""

from __future__ import annotations

import subprocess
import time

import pytest
from conftest import TFTRAIN
from hostile import assert_refused, nothing_written_outside

from runner.errors import ManifestError

pytestmark = pytest.mark.integration

JOB = "\nfrom azureml.train.dnn import TensorFlow\nest = TensorFlow(source_directory='.', entry_script='train.py')\n"
CASES = {
    "deep_calls.py": "x = f" + "()" * 100_000 + JOB,
    "unary.py": "x = " + "-" * 200_000 + "1" + JOB,
    "width.py": 'x = f"{1:>999999999}"\ny = "%999999999d" % 1' + JOB,
    "doubled.py": "L = [1]\n" + "L = [L, L]\n" * 40 + JOB,
    "deep.ipynb": '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_refused_in_one_line_within_seconds(tmp_path, name):
    (tmp_path / name).write_text(CASES[name])
    started = time.monotonic()
    with nothing_written_outside(tmp_path):
        result = subprocess.run(
            [TFTRAIN, "import", "azureml", name, "-o", "out/tftrain.yml"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert_refused(result, ManifestError, name)
    assert time.monotonic() - started < 20
