"""runner.training.retry: which endings start another attempt, and how the attempts are chained
(run_manifest stands in: no process starts here)."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pytest

from runner.errors import HostError, TrainingCanceled, TrainingFailed
from runner.history.record import Cause, RunRecord, RunStatus
from runner.history.rundir import RunPaths
from runner.history.store import Store
from runner.manifest import load_manifest
from runner.manifest.retry import RetrySpec
from runner.settings import LoggerSettings, Settings
from runner.targets.base import Outcome, RunControl
from runner.telemetry.logger import Logger
from runner.training import retry
from runner.training.pipeline import RunResult

SPEC = RetrySpec(on=["preempted", "lost"], exit_codes=[75])
PREEMPTED = retry.Ending(Cause.PREEMPTED)


def result(status: RunStatus, exit_code: int, ended: Outcome | None, stop_signal: int | None = None) -> RunResult:
    return RunResult("demo-1", status, exit_code, None, Path("/nowhere"), None, {}, ended, stop_signal)


FAILED = TrainingFailed.exit_code


@pytest.mark.parametrize(
    ("ending", "cause"),
    [
        pytest.param(
            result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, 137, "")), PREEMPTED, id="sigkill-by-a-shell"
        ),
        pytest.param(result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, -9, "")), PREEMPTED, id="sigkill"),
        pytest.param(
            result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, -15, "")), PREEMPTED, id="sigterm-from-outside"
        ),
        pytest.param(
            result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, None, "", taken=True)),
            PREEMPTED,
            id="container-vanished",
        ),
        pytest.param(
            result(RunStatus.FAILED, HostError.exit_code, Outcome(RunStatus.FAILED, None, "")),
            PREEMPTED,
            id="host-lost",
        ),
        pytest.param(
            result(RunStatus.CANCELED, TrainingCanceled.exit_code, None, signal.SIGTERM),
            PREEMPTED,
            id="tftrain-sigterm",
        ),
        pytest.param(
            result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, 75, "")),
            retry.Ending(Cause.EXIT_CODE, 75),
            id="listed-code",
        ),
        pytest.param(result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, 1, "")), None, id="script-error"),
        pytest.param(result(RunStatus.CANCELED, TrainingCanceled.exit_code, None, signal.SIGINT), None, id="ctrl-c"),
        pytest.param(result(RunStatus.TIMED_OUT, 13, Outcome(RunStatus.TIMED_OUT, None, "")), None, id="time-limit"),
        pytest.param(result(RunStatus.COMPLETED, 0, Outcome(RunStatus.COMPLETED, 0, None)), None, id="completed"),
    ],
)
def test_how_an_attempt_ended(ending, cause):
    assert retry.ending_cause(ending, SPEC) == cause


def test_an_ending_reads_as_people_read_it():
    assert (str(PREEMPTED), str(retry.Ending(Cause.EXIT_CODE, 75))) == ("preempted", "exit code 75")


def test_a_cause_the_manifest_does_not_name_is_no_retry():
    killed = result(RunStatus.FAILED, FAILED, Outcome(RunStatus.FAILED, 137, ""))
    assert retry.ending_cause(killed, RetrySpec(on=["lost"])) is None


class FakeRuns:
    """run_manifest's stand-in: each call records a run, writes a checkpoint, ends as told."""

    def __init__(self, home: Path, endings: list[Outcome]) -> None:
        self.home, self.endings, self.resumed = home, list(endings), []

    def __call__(self, loaded, logger, settings, home=None, watch=None) -> RunResult:
        manifest = loaded.manifest
        self.resumed.append(manifest.resume_from)
        with Store(home) as store:
            run_id = store.new_run(manifest.name, manifest.model_dump_json(by_alias=True))
            paths = RunPaths.for_run(home, run_id, manifest)
            (paths.outputs / "checkpoints").mkdir(parents=True)
            (paths.outputs / "checkpoints" / "epoch").write_text(run_id)
            watch.started(run_id, RunControl(marker="", grace_seconds=1), store)
            ended = self.endings.pop(0)
            code = 0 if ended.status == RunStatus.COMPLETED else FAILED
            store.finish(run_id, ended.status, code, ended.message)
        return RunResult(run_id, ended.status, code, ended.message, paths.root, None, {}, ended, None)


def run_said(loaded, stream, home: Path):
    """run_with_retry with a console the test reads: everything the logger's writer thread holds
    is written before the test looks."""
    logger = Logger(stream=stream)
    try:
        return retry.run_with_retry(loaded, logger, Settings(), home)
    finally:
        logger.flush()


def attempts(home: Path) -> list[dict]:
    with Store(home) as store:
        runs = list(reversed(store.runs()))
    return [RunRecord.read(Path(run.run_dir) / "run.json").as_dict()["attempt"] for run in runs]


def test_a_preempted_attempt_is_followed_by_one_that_resumes_from_its_checkpoints(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {max_attempts: 3}\n"))
    killed = Outcome(RunStatus.FAILED, 137, "exited with code 137 (killed by SIGKILL)")
    fake = FakeRuns(home, [killed, killed, Outcome(RunStatus.COMPLETED, 0, None)])
    monkeypatch.setattr(retry, "run_manifest", fake)
    summary = tmp_path / "summary.md"
    logger = Logger(stream=io.StringIO(), settings=LoggerSettings(step_summary=summary))
    ended = retry.run_with_retry(loaded, logger, Settings(), home)
    assert ended.status == RunStatus.COMPLETED and ended.run_id == "demo-3"
    first, second, third = attempts(home)
    assert first == {
        "number": 1,
        "max_attempts": 3,
        "previous": None,
        "resumed_from": None,
        "ended": "preempted",
        "next": "demo-2",
    }
    assert second["previous"] == "demo-1" and second["resumed_from"].endswith("runs/demo-1/workdir/outputs/checkpoints")
    assert (second["ended"], second["next"], third["number"], third["ended"]) == ("preempted", "demo-3", 3, None)
    assert fake.resumed == [None, second["resumed_from"], third["resumed_from"]]
    table = summary.read_text()
    assert (
        "### Attempts" in table
        and "| 1 | demo-1 | Failed | preempted |" in table
        and "| 3 | demo-3 | Completed |" in table
    )


def test_the_last_attempt_ends_the_chain(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {max_attempts: 2}\n"))
    killed = Outcome(RunStatus.FAILED, -9, "exited with code -9 (killed by SIGKILL)")
    monkeypatch.setattr(retry, "run_manifest", FakeRuns(home, [killed, killed]))
    stream = io.StringIO()
    ended = run_said(loaded, stream, home)
    assert ended.run_id == "demo-2" and ended.status == RunStatus.FAILED
    assert "no attempt left (retry.max_attempts: 2)" in stream.getvalue()
    assert [attempt["ended"] for attempt in attempts(home)] == ["preempted", "preempted"]


def test_a_lost_run_is_continued_by_the_next_tftrain_run(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {}\n"))
    with Store(home) as store:  # a run whose tftrain was killed: its owner is no process any more
        run_id = store.new_run("demo", loaded.manifest.model_dump_json(by_alias=True))
        paths = RunPaths.for_run(home, run_id, loaded.manifest)
        record = json.loads(paths.record.read_text())
        record["owner"]["start"] = -1
        paths.record.write_text(json.dumps(record))
        (paths.outputs / "checkpoints").mkdir(parents=True)
        (paths.outputs / "checkpoints" / "epoch").write_text("1")
    fake = FakeRuns(home, [Outcome(RunStatus.COMPLETED, 0, None)])
    monkeypatch.setattr(retry, "run_manifest", fake)
    retry.run_with_retry(loaded, Logger(stream=io.StringIO()), Settings(), home)
    lost, continued = attempts(home)
    assert (lost["ended"], lost["next"]) == ("lost", "demo-2")
    assert (continued["number"], continued["previous"]) == (2, "demo-1")
    assert fake.resumed == [str(paths.outputs / "checkpoints")]


def test_tftrain_stopped_by_sigterm_leaves_the_next_attempt_to_the_next_tftrain_run(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {}\n"))
    stopped = Outcome(RunStatus.CANCELED, None, "canceled by a signal to tftrain")

    class Stopped(FakeRuns):
        def __call__(self, *args, **kwargs) -> RunResult:
            ended = super().__call__(*args, **kwargs)
            return RunResult(
                *[
                    getattr(ended, name)
                    for name in ("run_id", "status", "exit_code", "message", "run_dir", "model", "metrics", "ended")
                ],
                signal.SIGTERM,
            )

    monkeypatch.setattr(retry, "run_manifest", Stopped(home, [stopped]))
    first = retry.run_with_retry(loaded, Logger(stream=io.StringIO()), Settings(), home)
    assert first.status == RunStatus.CANCELED  # its machine is going away: no attempt starts here
    assert attempts(home) == [
        {"number": 1, "max_attempts": 3, "previous": None, "resumed_from": None, "ended": "preempted", "next": None}
    ]

    fake = FakeRuns(home, [Outcome(RunStatus.COMPLETED, 0, None)])
    monkeypatch.setattr(retry, "run_manifest", fake)
    stream = io.StringIO()
    run_said(loaded, stream, home)
    assert "run demo-1 was preempted: this is attempt 2 of 3, resuming from" in stream.getvalue()
    assert [(a["number"], a["previous"], a["next"]) for a in attempts(home)] == [
        (1, None, "demo-2"),
        (2, "demo-1", None),
    ]


def test_a_user_cancel_is_not_continued(project, tmp_path, monkeypatch):
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {}\n"))
    monkeypatch.setattr(
        retry,
        "run_manifest",
        FakeRuns(home, [Outcome(RunStatus.CANCELED, None, "canceled"), Outcome(RunStatus.COMPLETED, 0, None)]),
    )
    retry.run_with_retry(loaded, Logger(stream=io.StringIO()), Settings(), home)
    retry.run_with_retry(loaded, Logger(stream=io.StringIO()), Settings(), home)
    assert [(a["number"], a["previous"], a["ended"]) for a in attempts(home)] == [(1, None, None), (1, None, None)]


def lost_run(home: Path, loaded, checkpoint_dir: str | None) -> RunPaths:
    """A run whose tftrain was killed (its owner is no process any more), with a file in `checkpoint_dir`."""
    with Store(home) as store:
        run_id = store.new_run(loaded.manifest.name, loaded.manifest.model_dump_json(by_alias=True))
        paths = RunPaths.for_run(home, run_id, loaded.manifest)
        record = json.loads(paths.record.read_text())
        record["owner"]["start"] = -1
        paths.record.write_text(json.dumps(record))
    if checkpoint_dir is not None:
        (paths.workdir / checkpoint_dir).mkdir(parents=True)
        (paths.workdir / checkpoint_dir / "epoch").write_text("1")
    return paths


def synced_manifest(bucket: str, endpoint: str) -> str:
    return (
        f"retry: {{}}\ncheckpoints: {{dir: outputs/ckpt, sync_to: 's3://{bucket}/team', endpoint_url: '{endpoint}'}}\n"
    )


@pytest.mark.parametrize("local", [True, False], ids=["local-checkpoint", "none"])
def test_a_retry_whose_previous_attempt_synced_nothing_falls_back(
    project, tmp_path, monkeypatch, s3_server, aws_env, local
):
    import boto3

    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=f"nothing-synced-{local}".lower())
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest=synced_manifest(f"nothing-synced-{local}".lower(), s3_server)))
    paths = lost_run(home, loaded, "outputs/ckpt" if local else None)
    fake = FakeRuns(home, [Outcome(RunStatus.COMPLETED, 0, None)])
    monkeypatch.setattr(retry, "run_manifest", fake)
    stream = io.StringIO()
    run_said(loaded, stream, home)
    said = " ".join(stream.getvalue().split())
    where = f"s3://nothing-synced-{local}/team".lower()
    if local:
        assert (
            f"run demo-1 synced no complete checkpoint to {where}: attempt 2 resumes from its local checkpoint"
            f" directory {paths.workdir / 'outputs/ckpt'}" in said
        )
        assert fake.resumed == [str(paths.workdir / "outputs/ckpt")]
    else:
        assert (
            f"run demo-1 synced no complete checkpoint to {where}: attempt 2 starts from scratch (no local checkpoint"
            " either)" in said
        )
        assert fake.resumed == [None]


def test_a_retry_resumes_from_what_the_previous_attempt_synced(project, tmp_path, monkeypatch, s3_server, aws_env):
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_server)
    s3.create_bucket(Bucket="some-synced")
    s3.put_object(
        Bucket="some-synced",
        Key="team/demo-1/tftrain-checkpoints.json",
        Body=json.dumps({"checkpoints": [{"name": "ckpt-1"}]}),
    )
    home = tmp_path / "home"
    loaded = load_manifest(project(manifest=synced_manifest("some-synced", s3_server)))
    lost_run(home, loaded, "outputs/ckpt")
    fake = FakeRuns(home, [Outcome(RunStatus.COMPLETED, 0, None)])
    monkeypatch.setattr(retry, "run_manifest", fake)
    stream = io.StringIO()
    run_said(loaded, stream, home)
    assert fake.resumed == ["checkpoint:demo-1"] and "synced no complete checkpoint" not in stream.getvalue()


def test_two_tftrain_runs_at_once_continue_a_lost_run_once(project, tmp_path, monkeypatch):
    """Each claimer records its run slowly (as a real one checks its target first): without the
    claim both would decide to be attempt 2 of demo-1 in that time."""
    import threading
    import time

    home = tmp_path / "home"
    loaded = load_manifest(project(manifest="retry: {}\n"))
    lost_run(home, loaded, "outputs/checkpoints")

    class Slow(FakeRuns):
        def __call__(self, loaded, logger, settings, home=None, watch=None) -> RunResult:
            time.sleep(0.5)
            return super().__call__(loaded, logger, settings, home, watch)

    monkeypatch.setattr(retry, "run_manifest", Slow(home, [Outcome(RunStatus.COMPLETED, 0, None)] * 2))
    streams = [io.StringIO(), io.StringIO()]
    claimers = [threading.Thread(target=run_said, args=(loaded, s, home)) for s in streams]
    for claimer in claimers:
        claimer.start()
    for claimer in claimers:
        claimer.join(timeout=60)
    chain = sorted((a["number"], a["previous"]) for a in attempts(home)[1:])
    assert chain == [(1, None), (2, "demo-1")]  # one continued demo-1; the other found it continued and started afresh
    assert sum("this is attempt 2 of 3" in s.getvalue() for s in streams) == 1
    assert attempts(home)[0]["next"] in ("demo-2", "demo-3")
