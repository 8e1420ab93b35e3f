"""A sweep's trials as one Slurm array job, without a cluster: the array's script (each task its
trial's own script, directory, variables and batch.log; the trials' #SBATCH lines; no secret in it),
when trials may share one, the batcher's batches, and the array tasks' ids as squeue and the jobcomp
file write them."""

from __future__ import annotations

import shlex
import subprocess
import threading
from pathlib import Path

import pytest
from slurming import slurm_model

from runner.targets.slurm import array_jobs, jobs
from runner.targets.slurm.array_jobs import (
    ArrayBatcher,
    ArrayEntry,
    alone_because,
    array_name,
    array_script,
    sbatch_options,
    split_env,
    task_id,
)
from runner.targets.slurm.script import Launch, LaunchMode, batch_request, batch_script

manifest = slurm_model


def trial_script(run_id: str, **fields) -> str:
    request = batch_request(manifest(max_run_duration_seconds=600, **fields), run_id, "tftrain:abc", 30)
    return batch_script(
        request, Launch(LaunchMode.SRUN, "srun x"), f"/runs/{run_id}/launch", f"/runs/{run_id}/w", run_id
    )


def entry(n: int, env: dict | None = None, secrets=frozenset(), options=None, warn=print) -> ArrayEntry:
    return ArrayEntry(
        Path(f"/runs/s-{n}/launch/slurm.sh"),
        Path(f"/runs/s-{n}/launch"),
        f"/runs/s-{n}/w d",
        options if options is not None else sbatch_options(trial_script(f"s-{n}")),
        env if env is not None else {"PATH": "/bin", "TFTRAIN_RUN_ID": f"s-{n}", "API_KEY": "hunter2"},
        secrets,
        "tftrain:abc",
        warn,
    )


def test_the_options_an_array_carries_are_the_trials_but_their_own():
    options = sbatch_options(trial_script("s-1"))
    assert "--comment=tftrain:abc" in options and "--nodes=1" in options and "--time=12" in options
    assert "--signal=TERM@30" in options and "--no-requeue" in options
    assert not [option for option in options if option.startswith(("--job-name", "--output", "--chdir", "--open-mode"))]
    assert options == sbatch_options(trial_script("s-2"))  # two trials of one sweep: alike


def test_the_array_script_runs_each_trial_in_its_own_directory_with_its_own_variables():
    entries = [entry(0), entry(1)]
    common, own = split_env(entries)
    assert common == {"PATH": "/bin", "API_KEY": "hunter2"}  # sbatch's environment: Slurm exports it
    assert own == [{"TFTRAIN_RUN_ID": "s-0"}, {"TFTRAIN_RUN_ID": "s-1"}]
    script = array_script(entries, own, array_name("sw-1"), Path("/sweeps/sw-1/slurm"), 2)
    assert "#SBATCH --job-name=tftrain-sweep-sw-1" in script
    assert "#SBATCH --array=0-1%2" in script
    assert "#SBATCH --output=/sweeps/sw-1/slurm/%A_%a.log" in script
    assert "#SBATCH --comment=tftrain:abc" in script and "#SBATCH --time=12" in script
    assert "hunter2" not in script  # the secret stays in sbatch's environment
    line = next(line for line in script.splitlines() if line.startswith("1) "))
    assert shlex.split(line.removeprefix("1) ").removesuffix(" ;;")) == [
        "cd", "/runs/s-1/w d", "&&", "exec", "env", "--", "TFTRAIN_RUN_ID=s-1", "/bin/bash",
        "/runs/s-1/launch/slurm.sh", ">>", "/runs/s-1/launch/batch.log", "2>&1",
    ]  # fmt: skip


def test_trials_that_cannot_share_an_array_go_alone():
    first = entry(0)
    assert alone_because(entry(1), first) is None
    assert "options differ" in alone_because(entry(1, options=("--nodes=2",)), first)
    assert "heterogeneous" in alone_because(entry(1, options=("--nodes=1", "hetjob", "--nodes=1")), None)
    other_secret = entry(1, env={"API_KEY": "other", "TFTRAIN_RUN_ID": "s-1"}, secrets=frozenset({"API_KEY"}))
    assert "secrets" in alone_because(other_secret, entry(0, secrets=frozenset({"API_KEY"})))
    missing = entry(1, env={"TFTRAIN_RUN_ID": "s-1"}, secrets=frozenset())
    assert "secrets" in alone_because(missing, entry(0, secrets=frozenset({"API_KEY"})))


class Sbatch:
    """What the batcher sends, answered with numbered array ids."""

    def __init__(self, refuse: Exception | None = None) -> None:
        self.sent: list[tuple[str, dict]] = []
        self.names: list[str] = []
        self.refuse = refuse

    def __call__(self, script: Path, env: dict, name: str, comment: str, warn) -> str:
        if self.refuse is not None:
            raise self.refuse
        self.sent.append((script.read_text(), env))
        self.names.append(name)
        return str(100 + len(self.sent))


def submit_all(batcher: ArrayBatcher, entries: list[ArrayEntry], tickets) -> list:
    answers: list = [None] * len(entries)

    def one(n: int) -> None:
        try:
            answers[n] = tickets[n].submit(entries[n])
        except Exception as exc:  # noqa: BLE001 - the test reads it
            answers[n] = exc

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(entries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return answers


def test_trials_ready_together_are_one_array_job(tmp_path):
    sbatch = Sbatch()
    batcher = ArrayBatcher(tmp_path, "tftrain-sweep-s", 2, sbatch, window=5.0)
    tickets = [batcher.opened(), batcher.opened()]
    answers = submit_all(batcher, [entry(0), entry(1)], tickets)
    assert sorted(answers) == ["101_0", "101_1"] and len(sbatch.sent) == 1
    assert "#SBATCH --array=0-1%2" in sbatch.sent[0][0]
    assert sbatch.sent[0][1]["API_KEY"] == "hunter2" and "TFTRAIN_RUN_ID" not in sbatch.sent[0][1]
    for ticket in tickets:
        ticket.close()  # after its submission: counts nothing twice
    third = batcher.opened()
    assert third.submit(entry(2)) == "102_0"  # the next trial, alone: waits for nobody
    assert third.submit(entry(2)) is None  # a second job of the same run (a retry): its own, not an array's
    # each array its own name (a submission sbatch does not confirm is looked for by it), the sweep's first
    assert len(set(sbatch.names)) == 2 and all(name.startswith("tftrain-sweep-s-") for name in sbatch.names)
    assert f"#SBATCH --job-name={sbatch.names[0]}\n" in sbatch.sent[0][0]


def test_a_trial_that_ends_before_it_submits_holds_no_batch(tmp_path):
    sbatch = Sbatch()
    batcher = ArrayBatcher(tmp_path, "n", 2, sbatch, window=30.0)
    ready, failing = batcher.opened(), batcher.opened()
    threading.Timer(0.2, failing.close).start()  # refused in its checks: never submits
    assert ready.submit(entry(0)) == "101_0"
    assert len(sbatch.sent) == 1


def test_the_window_bounds_the_wait_for_a_slow_trial(tmp_path):
    batcher = ArrayBatcher(tmp_path, "n", 2, Sbatch(), window=0.3)
    ready, _slow = batcher.opened(), batcher.opened()
    assert ready.submit(entry(0)) == "101_0"


def test_a_refused_array_fails_every_trial_of_it(tmp_path):
    refused = jobs.ClusterError("sbatch refused the job: no")
    batcher = ArrayBatcher(tmp_path, "n", 2, Sbatch(refuse=refused), window=5.0)
    tickets = [batcher.opened(), batcher.opened()]
    assert submit_all(batcher, [entry(0), entry(1)], tickets) == [refused, refused]


def test_a_trial_with_other_options_goes_alone_and_says_why(tmp_path):
    said = []
    batcher = ArrayBatcher(tmp_path, "n", 2, Sbatch(), window=0.5)
    first, second = batcher.opened(), batcher.opened()
    waiting = threading.Thread(target=first.submit, args=(entry(0),))
    waiting.start()
    while not batcher.waiting:
        pass
    assert second.submit(entry(1, options=("--nodes=2",), warn=said.append)) is None
    waiting.join(5)
    assert said and "job of its own" in said[0] and "options differ" in said[0]


def test_array_task_ids():
    assert task_id("123", 4) == "123_4"
    assert array_name("m sweep/1") == "tftrain-sweep-m_sweep_1"


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("55_0|c\n55_1|c\n55_[2-3%2]|c\n", ["55"]),  # one array: its tasks, and its pending ones together
        ("56_[0-3]|c\n", ["56"]),
        ("57_1|other\n", []),  # another home's
        ("58_x|c\n59_[0-1;rm]|c\n", []),  # not an array task's id
        ("60|c\n60_2|c\n", ["60"]),
    ],
)
def test_squeue_ids_of_array_jobs(monkeypatch, line, found):
    monkeypatch.setattr(jobs.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(jobs, "run", lambda argv, env=None: subprocess.CompletedProcess(argv, 0, line, ""))
    assert jobs.jobs_named("tftrain-sweep-s", "c") == found


def test_the_jobcomp_record_of_an_array_task(tmp_path):
    path = tmp_path / "jobcomp.log"
    path.write_text(
        "JobId=71 UserId=root(0) JobState=COMPLETED ExitCode=0:0 ArrayJobId=70 ArrayTaskId=1\n"
        "JobId=70 UserId=root(0) JobState=FAILED ExitCode=2:0 ArrayJobId=70 ArrayTaskId=0\n"
        "JobId=72 UserId=root(0) JobState=FAILED ExitCode=3:0\n"
    )
    assert jobs.from_jobcomp("70_1", path).state == jobs.JobState.COMPLETED
    assert jobs.from_jobcomp("70_0", path).exit_code == 2
    assert jobs.from_jobcomp("70", path).exit_code == 2
    assert jobs.from_jobcomp("72_0", path) is None


@pytest.mark.parametrize(
    ("written", "answer", "found"),
    [
        ("81_2\n", (0, "81_2|c\n"), ["81_2"]),
        ("81_2\n", (0, "81_2|another home\n"), []),
        ("81_2\n", (1, ""), []),  # slurmctld forgot it: it ended
        ("81_2; scancel -u root\n", (0, "81_2|c\n"), []),  # written by hand: no task id
        ("81\n", (0, "81|c\n"), []),  # a whole job is found by its name, not by this file
        (None, (0, "81_2|c\n"), []),
    ],
)
def test_a_lost_trials_array_task_is_found_by_its_file(monkeypatch, tmp_path, written, answer, found):
    asked = []
    monkeypatch.setattr(jobs.shutil, "which", lambda name: "/usr/bin/" + name)

    def run(argv, env=None):
        asked.append(argv)
        return subprocess.CompletedProcess(argv, answer[0], answer[1], "")

    monkeypatch.setattr(jobs, "run", run)
    path = tmp_path / "array-task"
    if written is not None:
        path.write_text(written)
    assert array_jobs.array_task_queued(path, "c") == found
    assert all(argv[:3] == ["squeue", "-h", "-j"] and argv[3] == "81_2" for argv in asked)


@pytest.mark.parametrize(
    ("compute", "batched"),
    [
        ({"target": "slurm"}, True),
        ({"target": "slurm", "slurm": {"array": False}}, False),
        ({"target": "local"}, False),
    ],
)
def test_a_sweep_batches_its_trials_on_slurm_unless_told_not_to(tmp_path, compute, batched):
    from runner.manifest import LoadedManifest
    from runner.settings import Settings
    from runner.sweep.driver import _sweep_batcher

    loaded = LoadedManifest(manifest(compute=compute), tmp_path / "tftrain.yml", ())
    arrays = _sweep_batcher(loaded, Settings(), tmp_path / "sweep", "m-sweep-1", 3)
    assert (arrays is not None) == batched
    if batched:
        assert (arrays.name, arrays.throttle, arrays.out_dir) == (
            "tftrain-sweep-m-sweep-1",
            3,
            tmp_path / "sweep" / "slurm",
        )
