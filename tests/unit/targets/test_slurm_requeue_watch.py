"""compute.slurm.time_limit without a cluster: the batch script that requeues the same job, rank.py's
silence while it does, and what the watcher makes of restarts, their causes and a refused requeue."""

from __future__ import annotations

from pathlib import Path

from runner.manifest.model import Manifest
from runner.targets.slurm import rank
from runner.targets.slurm.jobs import JobInfo, JobState, info_from, parse_fields
from runner.targets.slurm.requeue import SETTLE_SECONDS, Requeues
from runner.targets.slurm.script import Launch, LaunchMode, batch_request, batch_script


def manifest(slurm: dict, **fields) -> Manifest:
    compute = {"target": "slurm", "slurm": slurm}
    return Manifest.model_validate({"name": "m", "entry_script": "train.py", "compute": compute, **fields})


class Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, message: str) -> None:
        self.lines.append(message)


def test_a_time_limit_asks_for_a_requeue_at_usr1():
    request = batch_request(manifest({"time_limit": "0-00:02:00"}, max_run_duration_seconds=3600), "m-1", "c", 20)
    assert (request.time_minutes, request.signal_seconds, request.requeue) == (2, 20, True)
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/l", "/w", "m-1")
    for line in (
        "#SBATCH --time=2\n",
        "#SBATCH --signal=B:USR1@20\n",
        "#SBATCH --requeue\n",
        "#SBATCH --open-mode=append\n",
        "trap on_usr1 USR1\n",
        'srun x &\nlaunched=$!\nwait "$launched"\n',
        'scontrol requeue "$SLURM_JOB_ID"',
        'scancel --signal=TERM "$SLURM_JOB_ID"',
        'echo "$cause" > "$requeue_dir/.$restart.part" && mv -f "$requeue_dir/.$restart.part" "$requeue_dir/$restart"',
        "tftrain: slurm job $SLURM_JOB_ID: $cause: the tasks stop, the job is requeued (restart $((restart + 1)))",
        '[ "$SECONDS" -ge 55 ]',  # 120 s − 20 s of grace − 30 s of an early signal − 15 s for a late start
    ):
        assert line in script, script
    assert "--no-requeue" not in script and "TERM@" not in script


def test_without_a_time_limit_the_job_is_never_requeued():
    request = batch_request(manifest({}, max_run_duration_seconds=600), "m-1", "c", 30)
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/l", "/w", "m-1")
    assert request.requeue is False and "#SBATCH --no-requeue\n" in script and "#SBATCH --signal=TERM@30\n" in script
    assert "USR1" not in script and "scontrol requeue" not in script and "\nsrun x\n" in script


def test_mpirun_is_signalled_itself_and_writes_no_exit_status_when_requeued():
    request = batch_request(manifest({"time_limit": 5}), "m-1", "c", 10)
    script = batch_script(request, Launch(LaunchMode.MPIRUN, "mpirun -np 2 python t.py"), "/l", "/w", "m-1")
    assert 'kill -TERM "$launched"' in script and "scancel --signal=TERM" not in script
    assert "mpirun -np 2 python t.py &\nlaunched=$!\n" in script
    trap = script[script.index("on_usr1() {") : script.index("trap on_usr1")]
    assert "exit/driver" not in trap  # the trap exits: only a launch that ended by itself is a verdict


def test_rank_writes_no_exit_status_for_a_requeue(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert not rank.requeued(str(tmp_path))
    (tmp_path / "requeue").mkdir()
    (tmp_path / "requeue" / "0").write_text("time limit\n")
    assert not rank.requeued(str(tmp_path))  # the last start's marker
    (tmp_path / "requeue" / "1").write_text("time limit\n")
    assert rank.requeued(str(tmp_path))
    monkeypatch.setenv("SLURM_RESTART_COUNT", "../1")
    assert not rank.requeued(str(tmp_path))


def test_restarts_from_scontrol():
    line = "JobId=42 JobName=x JobState=PENDING Reason=BeginTime Requeue=1 Restarts=2 BatchFlag=1 ExitCode=0:0"
    info = info_from(parse_fields(line))
    assert (info.state, info.reason, info.restarts) == (JobState.PENDING, "BeginTime", 2)
    assert info_from(parse_fields("JobId=42 JobState=RUNNING Restarts=x")).restarts == 0


def test_each_restart_is_told_once_with_its_cause(tmp_path: Path):
    said = Said()
    requeues = Requeues("42", tmp_path, said, enabled=True)
    (tmp_path / "requeue").mkdir()
    (tmp_path / "requeue" / "0").write_text("time limit\n")
    (tmp_path / "requeue" / "1").write_bytes(b"\x1b[2J rm -rf /\n")  # not a cause the batch script writes
    requeues.seen(JobInfo(JobState.RUNNING), 10.0)
    requeues.seen(JobInfo(JobState.PENDING, restarts=1), 70.0)
    requeues.seen(JobInfo(JobState.RUNNING, restarts=1), 100.0)
    requeues.seen(JobInfo(JobState.RUNNING, restarts=3), 130.0)
    assert said.lines == [
        "slurm job 42 requeued (time limit) — restart 1",
        "slurm job 42 requeued (by Slurm: preemption, a node failure or scontrol requeue) — restart 2",
        "slurm job 42 requeued (by Slurm: preemption, a node failure or scontrol requeue) — restart 3",
    ]
    assert requeues.held(150.0) == 60.0 + 50.0  # the allocation's time over its starts, not the queue's
    requeues.seen(JobInfo(JobState.COMPLETED, restarts=3), 160.0)
    assert requeues.held(999.0) == 60.0 + 60.0


def test_preempted_is_the_way_back_to_pending(tmp_path: Path, monkeypatch):
    requeues = Requeues("42", tmp_path, Said(), enabled=True)
    clock = [100.0]
    monkeypatch.setattr("runner.targets.slurm.requeue.time.monotonic", lambda: clock[0])
    assert not requeues.over(JobInfo(JobState.PREEMPTED))
    clock[0] += SETTLE_SECONDS + 1
    assert requeues.over(JobInfo(JobState.PREEMPTED))  # it stayed there: ended
    assert requeues.over(JobInfo(JobState.COMPLETED)) and requeues.over(JobInfo(JobState.TIMEOUT))
    assert not requeues.over(JobInfo(JobState.PENDING))
    assert Requeues("42", tmp_path, Said(), enabled=False).over(JobInfo(JobState.PREEMPTED))


def test_a_refused_requeue_is_one_line(tmp_path: Path):
    requeues = Requeues("42", tmp_path, Said(), enabled=True)
    assert requeues.refused() is None
    (tmp_path / "requeue").mkdir()
    (tmp_path / "requeue" / "0.refused").write_bytes(
        b"slurm_requeue error: Access/permission denied\r\nmore" + b"x" * 9000
    )
    said = requeues.refused()
    assert said.startswith("slurm_requeue error: Access/permission denied") and "\n" not in said and len(said) <= 300
    assert Requeues("42", tmp_path, Said(), enabled=False).refused() is None
