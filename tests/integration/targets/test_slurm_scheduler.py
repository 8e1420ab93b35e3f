"""The slurm target on the real two-node cluster with Slurm's commands misbehaving: small scripts
first on PATH stand in for what the cluster cannot be made to do (answers that are not UTF-8, a
scontrol that hangs, an sbatch that answers late, no sacct and a job slurmctld forgot); each wraps
the real command, so the job itself is real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from slurming import slurm_manifest, submitted

pytestmark = pytest.mark.integration

SHORT = "import time\nprint('training', flush=True)\ntime.sleep(2)\nprint('done', flush=True)\n"


class FakeBin:
    """A directory first on PATH; `wrap(name, body)` puts a bash script there. Every process a
    script records in `pids` is ended when the test ends (by its id)."""

    def __init__(self, root: Path, monkeypatch) -> None:
        self.dir, self.pids = root / "fake-bin", root / "fake-bin.pids"
        self.dir.mkdir()
        self.monkeypatch = monkeypatch
        monkeypatch.setenv("PATH", f"{self.dir}:{os.environ['PATH']}")

    def wrap(self, name: str, body: str) -> None:
        path = self.dir / name
        path.write_text(f"#!/bin/bash\nREAL=/usr/bin/{name}\nPIDS={self.pids}\n{body}")
        path.chmod(0o755)

    def without(self, program: str, root: Path) -> None:
        """PATH without `program`: each directory holding it replaced by one of links to the rest."""
        entries = []
        for number, entry in enumerate(os.environ["PATH"].split(":")):
            if entry and (Path(entry) / program).exists():
                farm = root / f"path-{number}"
                farm.mkdir()
                for item in Path(entry).iterdir():
                    if item.name != program:
                        (farm / item.name).symlink_to(item)
                entry = str(farm)
            entries.append(entry)
        self.monkeypatch.setenv("PATH", ":".join(entries))

    def end(self) -> None:
        if self.pids.exists():
            for pid in {int(line) for line in self.pids.read_text().split()}:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    fake = FakeBin(tmp_path, monkeypatch)
    yield fake
    fake.end()


def left_running(said: str) -> list[str]:
    """The jobs this run submitted that squeue still lists (other sessions' jobs may share the cluster)."""
    ids = submitted(said)
    assert ids, said[-3000:]
    out = subprocess.run(
        ["/usr/bin/squeue", "-h", "-j", ",".join(ids), "-o", "%i %T"], capture_output=True, text=True, timeout=30
    )
    return out.stdout.split("\n") if out.stdout.strip() else []


def record(home: Path) -> dict:
    return json.loads((home / "runs/demo-1/run.json").read_text())


def test_answers_that_are_not_utf8(project, cli, home, slurm_cluster, fake_bin):
    """sbatch --test-only, sbatch and scontrol answering bytes that are not UTF-8: tftrain crashed
    (UnicodeDecodeError), and at submit recorded the run Failed while the job ran on unsupervised."""
    fake_bin.wrap(
        "sbatch",
        '"$REAL" "$@" >"$0.out" 2>"$0.err"; code=$?\n'
        'printf \'%s\\xff\\n\' "$(cat "$0.out")"; printf \'%s\\xfe\\n\' "$(cat "$0.err")" >&2; exit $code\n',
    )
    fake_bin.wrap("scontrol", 'out=$("$REAL" "$@"); code=$?\nprintf \'%s \\xff\\xfe\\n\' "$out"; exit $code\n')
    result = cli("run", "-f", str(slurm_manifest(project, SHORT)), timeout=300)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert "Traceback" not in said and "internal error" not in said
    assert "sbatch answered no job id" in said and "tftrain supervises it" in said, said[-3000:]
    assert record(home)["status"] == "Completed"
    assert "done" in (home / "runs/demo-1/workdir/logs/0.log").read_text()
    assert left_running(said) == []


@pytest.mark.parametrize("jobcomp", [True, False], ids=["jobcomp", "exit-files-only"])
def test_no_sacct_and_a_job_slurmctld_forgot(project, cli, home, slurm_cluster, fake_bin, tmp_path, jobcomp):
    """slurmctld forgets an ended job (MinJobAge) and there is no sacct: the run was Failed,
    "cannot run sacct" (exit 7), while the task's exit file said 0."""
    fake_bin.without("sacct", tmp_path)
    forget = (  # an ended job is one slurmctld no longer knows
        'if [ "$1" = -o ] && [ "$3" = job ]; then\n'
        '  out=$("$REAL" "$@") || exit $?\n'
        '  if grep -qE "JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)" <<<"$out"; then\n'
        '    echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1\n'
        "  fi\n"
        '  echo "$out"; exit 0\n'
        "fi\n"
    )
    config = (
        "" if jobcomp else 'if [ "$1" = show ] && [ "$2" = config ]; then "$REAL" "$@" | grep -v JobComp; exit 0; fi\n'
    )
    fake_bin.wrap("scontrol", forget + config + 'exec "$REAL" "$@"\n')
    result = cli("run", "-f", str(slurm_manifest(project, "print('trained', flush=True)\n")), timeout=300)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert "cannot run sacct" not in said and "Traceback" not in said
    assert record(home)["status"] == "Completed"
    assert left_running(said) == []


def test_a_hung_scontrol(project, cli, home, slurm_cluster, fake_bin):
    """scontrol hangs when asked about the job: a 2 s task stayed Running 152 s with nothing on the
    console, and usage and cost came out 75× what Slurm billed."""
    fake_bin.wrap(
        "scontrol",
        'if [ "$1" = -o ] && [ "$3" = job ]; then echo $$ >>"$PIDS"; exec sleep 120; fi\nexec "$REAL" "$@"\n',
    )
    path = slurm_manifest(project, SHORT, "  cost: {cpu_hour: 3600, gpu_hour: 0}\n")  # under compute:
    begun = time.monotonic()
    result = cli("run", "-f", str(path), timeout=300)
    took = time.monotonic() - begun
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert took < 25, f"{took:.1f} s: {said[-3000:]}"  # under the 30 s one question may take
    usage = record(home)["usage"]
    assert 1.5 <= usage["wall_seconds"] < 8, usage  # the 2 s job, not tftrain's wait
    assert usage["cost"] == pytest.approx(usage["wall_seconds"], abs=0.01)  # one CPU at 1/s
    assert left_running(said) == []


def test_an_sbatch_that_answers_too_late(project, cli, home, slurm_cluster, fake_bin):
    """sbatch submits, then does not answer in time (30 s): the job is found by its name and this
    home's comment and supervised, never left training unseen."""
    fake_bin.wrap(
        "sbatch",
        'if [ "$1" = --parsable ]; then "$REAL" "$@" >/dev/null || exit $?; echo $$ >>"$PIDS"; exec sleep 120; fi\n'
        'exec "$REAL" "$@"\n',
    )
    result = cli("run", "-f", str(slurm_manifest(project, SHORT)), timeout=300)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert "sbatch did not answer in 30 s" in said and "tftrain supervises it" in said
    assert record(home)["status"] == "Completed"
    assert left_running(said) == []
