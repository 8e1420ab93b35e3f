"""Hostile corpus: the disk fills up under a running training (TFTRAIN_HOME on a 1 MB tmpfs).

The log stops at the line where the space ran out and the console says so (never that the rest is
in the log); the run ends Failed with exit 22 and one error line naming the first file that could
not be written (the rank log), not a record written later for want of the same space (run.json)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from hostile import assert_refused, files_containing, nothing_written_outside

from runner.errors import DiskFullError

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-disk-full-4c1d"
LINES_BEFORE = 40
FILL_THEN_PRINT = """\
import os, time
for i in range(%d):
    print("before", i, os.environ["TOKEN"], flush=True)  # masked in the log and on the console
deadline = time.monotonic() + 30
while not (os.path.exists("../manifest.lock.yml") and open("logs/0.log").read().count("before") == %d):
    assert time.monotonic() < deadline, "tftrain never recorded the run's start"
    time.sleep(0.05)
with open("outputs/big.bin", "wb", buffering=0) as handle:
    for size in (1 << 16, 4096, 1):
        try:
            while True:
                handle.write(b"x" * size)
        except OSError:
            pass
for i in range(2000):
    print("after", i, "y" * 200, flush=True)
""" % (LINES_BEFORE, LINES_BEFORE)


@pytest.fixture
def tiny_home(tmp_path, monkeypatch):
    """TFTRAIN_HOME on a 1 MB tmpfs, unmounted at the end."""
    home = tmp_path / "tiny-home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(home)], check=True, timeout=30)
    monkeypatch.setenv("TFTRAIN_HOME", str(home))
    yield home
    subprocess.run(["umount", "--lazy", str(home)], check=True, timeout=30)


def test_a_full_disk_names_the_log_that_failed_first_and_says_where_it_ends(
    project, cli, tiny_home, tmp_path, monkeypatch
):
    monkeypatch.setenv("TOKEN", SECRET)
    manifest = project(script=FILL_THEN_PRINT, manifest='secrets: [TOKEN]\nmodel: {gate: "off"}\n', name="full")
    with nothing_written_outside(tmp_path, tiny_home, tmp_path / "project"):
        result = cli("run", "-f", str(manifest), timeout=120)
    log = tiny_home / "runs" / "full-1" / "workdir" / "logs" / "0.log"
    line = assert_refused(result, DiskFullError, f"disk full writing {log} ")
    assert "run.json" not in line and "metrics" not in line
    said = [text for text in result.stdout.splitlines() if "disk full writing" in text]
    assert len(said) == 1, said
    ends = int(re.search(r"\(the log ends at line (\d+)\)", said[0])[1])
    kept = log.read_text()
    assert kept.count("before") == LINES_BEFORE and kept.count("\n") == ends  # the line it named, whole
    assert "all are in" not in result.stdout  # nothing claims the lost lines are in the log
    record = json.loads((tiny_home / "runs" / "full-1" / "run.json").read_text())
    assert record["status"] == "Failed" and record["exit_code"] == 22
    assert re.match(rf"disk full writing {re.escape(str(log))} ", record["message"]), record["message"]
    assert SECRET not in result.stdout + result.stderr and not files_containing(tiny_home, [SECRET.encode()])
