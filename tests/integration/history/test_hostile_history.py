"""Hostile references and a hostile history through the real CLI, each command a process held to a
timeout: a run number or model version no run or version can have (23 digits, `v01`, Arabic-Indic
digits) is "not found" (exit 5, one line) on every command that takes one, and refused at
validate in resume_from (exit 3, FILE:LINE); tftrain.db, its -wal/-shm, history.lock or a run.json
that is a FIFO, a link to /dev/urandom, a directory, … never hangs a command: one line naming it
and `tftrain doctor` (exit 21), and doctor sets it aside and rebuilds."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import TFTRAIN
from history_damage import digest
from hostile import assert_clean, assert_refused, files_containing, nothing_written_outside

from runner.errors import HistoryError, ManifestError, NotFoundError, RegistryError, UsageError
from runner.history.model_registry import Registry
from runner.history.store import Store

pytestmark = pytest.mark.integration

SECONDS = 30  # each command answers in well under one; a hang fails here
SECRET = "ghp_hostile-history-not-to-be-printed"
HUGE = "9" * 23
MANIFEST = json.dumps({"name": "demo", "entry_script": "train.py"})


@pytest.fixture
def history(tmp_path) -> Path:
    """A TFTRAIN_HOME with one Completed run (demo-1) that registered demo@v1."""
    home = tmp_path / "home"
    source = tmp_path / "model"
    source.mkdir()
    (source / "weights.bin").write_bytes(b"\0" * 64)
    with Store(home) as store:
        run_id = store.new_run("demo", MANIFEST)
        store.finish(run_id, "Completed", 0, None)
        Registry(store).register("demo", source, run_id, {"run_id": run_id})
        store.update_run(run_id, model="demo@v1")
    return home


def tftrain(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TFTRAIN_HOME": str(home), "GITHUB_TOKEN": SECRET, "COLUMNS": "200"}
    return subprocess.run(
        [TFTRAIN, *args], capture_output=True, text=True, timeout=SECONDS, env=env, cwd=cwd or home.parent
    )


def assert_secret_kept(result: subprocess.CompletedProcess, root: Path) -> None:
    assert SECRET not in result.stdout + result.stderr
    assert not files_containing(root, [SECRET.encode()])


# --- references -------------------------------------------------------------------------------
# (id, arguments (OUT: an output directory that must not appear), what the one line says)
RUN_NOT_FOUND = f"run '{HUGE}' not found in"
NO_VERSION = "cannot exist: a version is v1, v2, …"
NOT_FOUND = [
    ("runs-show", ["runs", "show", HUGE], RUN_NOT_FOUND),
    ("logs", ["logs", HUGE], RUN_NOT_FOUND),
    ("metrics", ["metrics", HUGE], RUN_NOT_FOUND),
    ("models-register", ["models", "register", HUGE], RUN_NOT_FOUND),
    ("publish", ["publish", "--run", HUGE], RUN_NOT_FOUND),
    ("models-pull", ["models", "pull", f"demo@v{HUGE}", "-o", "OUT"], f"model 'demo@v{HUGE}' {NO_VERSION}"),
    ("serve-version", ["serve", f"demo@v{HUGE}"], NO_VERSION),
    ("serve-run", ["serve", HUGE], f"'{HUGE}' is neither a run nor a registered model"),
    ("deploy", ["deploy", f"demo@v{HUGE}", "--image", "example/demo"], NO_VERSION),
    ("sweeps-show", ["sweeps", "show", f"demo-sweep-{HUGE}"], "not found"),
    ("runs-show-arabic-indic", ["runs", "show", "١"], "run '١' not found"),
    ("runs-show-leading-zero", ["runs", "show", "01"], "run '01' not found"),
    ("models-pull-arabic-indic", ["models", "pull", "demo@v١", "-o", "OUT"], NO_VERSION),
    ("models-pull-leading-zero", ["models", "pull", "demo@v01", "-o", "OUT"], NO_VERSION),
    ("serve-v0", ["serve", "demo@v0"], NO_VERSION),
    ("models-pull-long", ["models", "pull", f"demo@v{'9' * 100_000}", "-o", "OUT"], "…' cannot exist"),
    ("models-pull-long-name", ["models", "pull", "a" * 100_000, "-o", "OUT"], "a… is not registered"),
]


@pytest.mark.parametrize("case", NOT_FOUND, ids=[case[0] for case in NOT_FOUND])
def test_a_number_no_run_or_version_can_have_is_not_found(history, tmp_path, case):
    _, args, says = case
    out = tmp_path / "out"
    records = [digest(history / "runs"), digest(history / "models")]
    with nothing_written_outside(tmp_path, history):  # SQLite's -wal and -shm come and go in home
        result = tftrain(history, *[str(out) if arg == "OUT" else arg for arg in args])
    assert [digest(history / "runs"), digest(history / "models")] == records
    line = assert_refused(result, NotFoundError, says)
    assert len(line) < 400, line
    assert not out.exists()
    assert_secret_kept(result, tmp_path)


def test_the_same_commands_find_what_exists(history, tmp_path):
    """The refusals above come from the numbers, not from an empty history."""
    assert_clean(tftrain(history, "runs", "show", "1"))
    assert_clean(tftrain(history, "metrics", "demo-1"))
    assert_clean(tftrain(history, "models", "pull", "demo@v1", "-o", str(tmp_path / "out")))
    assert (tmp_path / "out" / "weights.bin").read_bytes() == b"\0" * 64


def test_a_sweep_id_past_its_digits_is_refused_before_anything_runs(history, tmp_path):
    manifest = tmp_path / "tftrain.yml"
    manifest.write_text("name: demo\nentry_script: train.py\n")
    with nothing_written_outside(tmp_path, history):
        result = tftrain(history, "sweep", "resume", f"demo-sweep-{HUGE}", "-f", str(manifest))
    assert_refused(result, UsageError, "SWEEP_ID", "NAME-sweep-N")


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        (f"model:demo@v{HUGE}", "cannot exist"),
        ("model:demo@v01", "cannot exist"),
        ("model:demo@v١", "cannot exist"),
        (f"checkpoint:{HUGE}", "cannot exist"),
        ("model:de mo", "is not a model reference"),
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_resume_from_that_can_name_nothing_is_refused_at_validate(history, tmp_path, command, ref, says):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("raise SystemExit('never runs')\n")
    (project / "tftrain.yml").write_text(
        f'name: demo\nsource_directory: src\nentry_script: train.py\nresume_from: "{ref}"\n'
    )
    with nothing_written_outside(tmp_path, history):
        result = tftrain(history, command, "-f", str(project / "tftrain.yml"), cwd=project)
    assert_refused(result, ManifestError, "tftrain.yml:4", "resume_from", says)
    assert not (history / "runs" / "demo-2").exists()
    assert_secret_kept(result, tmp_path)


# --- the history's files ------------------------------------------------------------------------
def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link_to(target: str):
    def make(path: Path) -> None:
        path.symlink_to(target)

    return make


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "x").write_text("kept\n")


# (id, which file, how it is made odd, what the line calls it)
ODD = [
    ("db-fifo", "tftrain.db", _fifo, "a FIFO"),
    ("db-urandom", "tftrain.db", _link_to("/dev/urandom"), "a symlink to a character device ('/dev/urandom')"),
    ("db-null", "tftrain.db", _link_to("/dev/null"), "a symlink to a character device ('/dev/null')"),
    ("db-directory", "tftrain.db", _directory, "a directory"),
    ("db-socket", "tftrain.db", _socket, "a socket"),
    ("db-link-to-fifo", "tftrain.db", _link_to("elsewhere.fifo"), "a symlink to a FIFO"),
    ("wal-fifo", "tftrain.db-wal", _fifo, "a FIFO"),
    ("shm-urandom", "tftrain.db-shm", _link_to("/dev/urandom"), "a symlink to a character device"),
    ("lock-fifo", "history.lock", _fifo, "a FIFO"),
    ("lock-urandom", "history.lock", _link_to("/dev/urandom"), "a symlink to a character device"),
]


@pytest.mark.parametrize("case", ODD, ids=[case[0] for case in ODD])
def test_an_odd_history_file_is_named_and_doctor_sets_it_aside(history, tmp_path, case):
    _, name, make, called = case
    (history / name).unlink(missing_ok=True)  # the index is rebuilt from runs/ and models/
    if make is not _fifo and "fifo" in case[0]:
        os.mkfifo(history / "elsewhere.fifo")
    make(history / name)
    mode = os.lstat(history / name).st_mode

    with nothing_written_outside(tmp_path, history):
        refused = tftrain(history, "runs")
        assert_refused(refused, HistoryError, str(history / name), called, "tftrain doctor")
        doctor = tftrain(history, "doctor")
        assert_clean(doctor)
        shown = tftrain(history, "runs", "show", "demo-1")
        assert_clean(shown)
        assert_clean(tftrain(history, "models", "pull", "demo@v1", "-o", str(history / "pulled")))
    assert "Completed" in shown.stdout and "kept the old index as" in doctor.stdout + doctor.stderr
    base, _, suffix = name.partition("-")  # tftrain.db-wal goes aside as tftrain.db.damaged-TIME-wal
    aside = [
        path for path in history.iterdir() if path.name.startswith(f"{base}.damaged-") and path.name.endswith(suffix)
    ]
    assert len(aside) == 1 and os.lstat(aside[0]).st_mode == mode  # moved as it was, never opened or replaced
    assert stat.S_ISREG(os.lstat(history / "tftrain.db").st_mode)
    assert_secret_kept(doctor, tmp_path)


def test_a_link_to_nothing_is_never_followed_out_of_the_history(history, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "index.db"
    (history / "tftrain.db").unlink()
    (history / "tftrain.db").symlink_to(elsewhere)
    with nothing_written_outside(tmp_path, history):
        assert_refused(tftrain(history, "runs"), HistoryError, "a symlink to nothing", "tftrain doctor")
        assert_clean(tftrain(history, "doctor"))
        assert_clean(tftrain(history, "runs", "show", "demo-1"))
    assert not elsewhere.parent.exists()


def test_a_fifo_run_record_hangs_neither_a_command_nor_doctor(history, tmp_path):
    record = history / "runs" / "demo-1" / "run.json"
    kept = record.read_bytes()
    record.unlink()
    os.mkfifo(record)
    with nothing_written_outside(tmp_path, history):
        assert_clean(tftrain(history, "runs"))
        assert_clean(tftrain(history, "runs", "show", "demo-1"))
        rebuilt = tftrain(history, "doctor", "--rebuild")
    assert_clean(rebuilt)
    assert "run.json: not a regular file" in rebuilt.stderr + rebuilt.stdout
    assert stat.S_ISFIFO(os.lstat(record).st_mode)  # left as it is: the run directory is the user's
    record.unlink()
    record.write_bytes(kept)
    assert_clean(tftrain(history, "doctor", "--rebuild"))
    assert "Completed" in tftrain(history, "runs", "show", "demo-1").stdout


def test_a_limit_past_what_sqlite_holds_lists_every_run(history):
    listed = tftrain(history, "runs", "--limit", HUGE)
    assert_clean(listed)
    assert "demo-1" in listed.stdout


# (id, record, key, value written into it by hand, what doctor's warning says)
RECORDS = [
    ("exit-code-huge", "runs/demo-1/run.json", ("exit_code",), int(HUGE), "run.json: holds a number past 64 bits"),
    ("created-infinite", "runs/demo-1/run.json", ("created",), float("inf"), "run.json: holds NaN or Infinity"),
    ("created-year-10000", "runs/demo-1/run.json", ("created",), 2.6e11, "run.json: created is 260000000000"),
    ("manifest-nan", "runs/demo-1/run.json", ("manifest", "x"), float("nan"), "run.json: holds NaN or Infinity"),
    ("version-nan", "models/demo/v1/version.json", ("bytes",), float("nan"), "version.json: holds NaN or Infinity"),
]


@pytest.mark.parametrize("case", RECORDS, ids=[case[0] for case in RECORDS])
def test_numbers_in_a_record_the_index_cannot_hold_leave_it_out_of_the_rebuild(history, tmp_path, case):
    _, relative, keys, value, says = case
    path = history / relative
    kept = path.read_bytes()
    record = json.loads(kept)
    *parents, last = keys
    target = record
    for key in parents:
        target = target[key]
    target[last] = value
    path.write_text(json.dumps(record))
    with nothing_written_outside(tmp_path, history):
        rebuilt = tftrain(history, "doctor", "--rebuild")
        assert_clean(rebuilt)
        assert says in rebuilt.stderr + rebuilt.stdout
        assert_clean(tftrain(history, "runs"))
        assert_clean(tftrain(history, "models"))
        healthy = tftrain(history, "doctor")
    assert_clean(healthy)
    assert ": ok (" in healthy.stdout + healthy.stderr  # what was rebuilt is healthy: no loop of rebuilds
    path.write_bytes(kept)
    assert_clean(tftrain(history, "doctor", "--rebuild"))
    assert "Completed" in tftrain(history, "runs", "show", "demo-1").stdout


@pytest.mark.parametrize("name", ["runs", "models"])
@pytest.mark.parametrize(
    "make",
    [_fifo, _link_to("/dev/urandom"), lambda path: path.write_text("not a directory\n")],
    ids=["fifo", "urandom", "file"],
)
def test_records_that_are_not_a_directory_are_one_line_and_never_moved(history, tmp_path, name, make):
    """runs/ and models/ are the truth the index comes from: nothing rebuilds them, so doctor
    names what to move instead of setting them aside."""
    (history / name).rename(tmp_path / "kept")
    make(history / name)
    mode = os.lstat(history / name).st_mode
    with nothing_written_outside(tmp_path, history):
        for command in (["runs"], ["models"], ["doctor"], ["doctor", "--rebuild"]):
            result = tftrain(history, *command)
            assert_refused(result, HistoryError, str(history / name), "not a directory", "move it away")
            assert_secret_kept(result, tmp_path)
    assert os.lstat(history / name).st_mode == mode
    (history / name).unlink()
    (tmp_path / "kept").rename(history / name)
    assert "Completed" in tftrain(history, "runs", "show", "demo-1").stdout


# (command, the file in the run directory it reads, what the one line says)
RUN_FILES = [
    (["logs", "demo-1"], "workdir/logs/0.log", "is no log tftrain wrote (not a regular file)"),
    (["logs", "demo-1", "--follow"], "workdir/logs/0.log", "is no log tftrain wrote (not a regular file)"),
    (["metrics", "demo-1"], "metrics.jsonl", "holds no metrics tftrain wrote (not a regular file)"),
]


@pytest.mark.parametrize("make", [_fifo, _link_to("/dev/urandom")], ids=["fifo", "urandom"])
@pytest.mark.parametrize("case", RUN_FILES, ids=["logs", "logs-follow", "metrics"])
def test_a_run_file_that_is_not_a_regular_file_is_never_read(history, tmp_path, case, make):
    """The training can put a FIFO where its log or metrics go: reading it would never end."""
    command, relative, says = case
    path = history / "runs" / "demo-1" / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)
    with nothing_written_outside(tmp_path, history):
        result = tftrain(history, *command)
    assert_refused(result, NotFoundError, str(path), says)
    assert_secret_kept(result, tmp_path)


# --- records another party can write: one safe reader ---------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000  # a RecursionError in json, pydantic and every walk after


def _nested_in(path: Path, text: str) -> None:
    """`text` as the value of a new key of the JSON object in `path`."""
    path.write_text(path.read_text().rstrip().rstrip("}") + f', "x": {text}}}')


# (id, record, how it is damaged, what the one line names)
DAMAGED_RECORDS = [
    ("run-deep", "runs/demo-1/run.json", lambda path: path.write_text(DEEP), "run.json: nested deeper than"),
    ("run-deep-inside", "runs/demo-1/run.json", lambda path: _nested_in(path, DEEP), "run.json: nested deeper than"),
    (
        "run-surrogate",
        "runs/demo-1/run.json",
        lambda path: _nested_in(path, '"\\ud800"'),
        "run.json: holds a string that is not Unicode",
    ),
    (
        "run-not-utf8",
        "runs/demo-1/run.json",
        lambda path: path.write_bytes(path.read_bytes().replace(b"demo", b"d\xffmo", 1)),
        "run.json: not UTF-8",
    ),
    (
        "run-huge-int",
        "runs/demo-1/run.json",
        lambda path: _nested_in(path, "9" * 5000),
        "run.json: holds a number past 64 bits",
    ),
    (
        "version-deep",
        "models/demo/v1/version.json",
        lambda path: path.write_text(DEEP),
        "version.json: nested deeper than",
    ),
    (
        "version-deep-inside",
        "models/demo/v1/version.json",
        lambda path: _nested_in(path, '{"a": ' * 100_000 + "1" + "}" * 100_000),
        "version.json: nested deeper than",
    ),
    (
        "version-surrogate",
        "models/demo/v1/version.json",
        lambda path: _nested_in(path, '"\\udcff"'),
        "version.json: holds a string that is not Unicode",
    ),
]


@pytest.mark.parametrize("case", DAMAGED_RECORDS, ids=[case[0] for case in DAMAGED_RECORDS])
def test_a_damaged_record_is_one_line_and_the_rest_of_the_history_works(history, tmp_path, case):
    """With the index lost (every command rebuilds it) and after doctor --rebuild: no command
    fails; doctor names the record in one line and leaves it out; the other record still serves."""
    _, relative, damage, says = case
    damage(history / relative)
    (history / "tftrain.db").unlink()
    with nothing_written_outside(tmp_path, history):
        first = tftrain(history, "runs")  # rebuilds the index: says one was left out
        assert_clean(first)
        results = [
            tftrain(history, *command) for command in (["runs"], ["models"], ["doctor"], ["doctor", "--rebuild"])
        ]
    for result in results:
        assert_clean(result)
        assert_secret_kept(result, tmp_path)
    assert "left out: see `tftrain doctor`" in first.stdout + first.stderr
    rebuilt = results[3].stdout + results[3].stderr
    line = next(line for line in rebuilt.splitlines() if "could not rebuild" in line)
    assert str(history / relative.rsplit("/", 1)[0]) in line and says in line and len(line) < 400, line
    if relative.startswith("runs/"):
        assert "demo" in results[1].stdout and "v1" in results[1].stdout
        assert_clean(tftrain(history, "models", "pull", "demo@v1", "-o", str(tmp_path / "out")))
    else:
        assert "demo-1" in results[0].stdout and "Completed" in results[0].stdout
        assert_refused(tftrain(history, "serve", "demo@v1", "--port", "0"), NotFoundError, "demo@v1 is not registered")


LOCK = "manifest.lock.yml"
# (id, file in the run directory, how it is changed, what the provenance leaves out, if anything)
ODD_RUN_RECORDS = [
    (
        "phase-1e300",
        "run.json",
        lambda record: {**record, "phases": [{"phase": "Running", "started": 1e300, "ended": None}]},
        None,
    ),
    ("created-1e300", "run.json", lambda record: {**record, "created": 1e300}, None),
    (
        "lock-5000-digits",
        LOCK,
        "manifest:\n  name: demo\n  epochs: " + "7" * 5000 + "\n",
        "manifest.lock.yml: not YAML",
    ),
    (
        "lock-4000-digits",
        LOCK,
        "manifest:\n  name: demo\n  epochs: " + "7" * 4000 + "\n",
        "manifest.lock.yml: holds a number past 64 bits",
    ),
    (
        "lock-deep",
        LOCK,
        "manifest: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "manifest.lock.yml: not YAML",
    ),  # libyaml bounds it
    ("lock-nan", LOCK, "manifest: {x: .nan}\n", "manifest.lock.yml: holds NaN or Infinity"),
    (
        "run-surrogate",
        "run.json",
        '{"run_id": "demo-1", "git": {"commit": "\\ud800"}}',
        "run.json: holds a string that is not Unicode",
    ),
    ("run-nan", "run.json", '{"run_id": "demo-1", "created": NaN}', "run.json: holds NaN or Infinity"),
    ("run-deep", "run.json", DEEP, "run.json: nested deeper than"),
]


@pytest.mark.parametrize("case", ODD_RUN_RECORDS, ids=[case[0] for case in ODD_RUN_RECORDS])
def test_models_register_takes_odd_run_records(history, tmp_path, case):
    """The run's records are the training's directory: a provenance is written from what can be
    read, and what cannot is one warning line naming the file."""
    _, name, change, left_out = case
    run_dir = history / "runs" / "demo-1"
    (run_dir / "workdir" / "outputs" / "model").mkdir(parents=True)
    (run_dir / "workdir" / "outputs" / "model" / "weights.bin").write_bytes(b"\1" * 32)
    if callable(change):
        (run_dir / name).write_text(json.dumps(change(json.loads((run_dir / name).read_text()))))
    else:
        (run_dir / name).write_text(change)
    with nothing_written_outside(tmp_path, history):
        result = tftrain(history, "models", "register", "demo-1")
    assert_clean(result)
    assert "registered model demo@v2" in result.stdout
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "provenance leaves it out" in line]
    if left_out:
        assert (
            len(warnings) == 1 and str(run_dir / name) in warnings[0] and left_out.split(": ", 1)[1] in warnings[0]
        ), result.stderr
    else:
        assert not warnings, result.stderr
    statement = json.loads((history / "models" / "demo" / "v2" / "provenance.intoto.json").read_text())
    assert statement["subject"] == [
        {"name": "weights.bin", "digest": {"sha256": __import__("hashlib").sha256(b"\1" * 32).hexdigest()}}
    ]
    assert_clean(tftrain(history, "models"))


# --- a copied home reads its own files ------------------------------------------------------------
def _absolute_paths(home: Path) -> None:
    """tftrain.db as tftrain wrote it before its paths were relative: absolute, user_version 0."""
    import sqlite3

    with sqlite3.connect(home / "tftrain.db") as db:
        db.execute("UPDATE runs SET run_dir = ? || '/runs/' || run_id", (str(home),))
        db.execute("UPDATE models SET path = ? || '/models/' || name || '/v' || version", (str(home),))
        db.execute("PRAGMA user_version = 0")
    db.close()


@pytest.mark.parametrize("old_index", [False, True], ids=["relative", "absolute-paths"])
def test_a_copied_home_reads_its_own_files_never_the_originals(history, tmp_path, old_index):
    import shutil

    if old_index:
        _absolute_paths(history)
    copy = tmp_path / "restored" / "home"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(history), str(copy)], check=True)
    (copy / "models" / "demo" / "v1" / "model" / "weights.bin").write_bytes(b"\1" * 64)  # the copy's own, changed
    pulled = tftrain(copy, "models", "pull", "demo@v1", "-o", str(tmp_path / "out"))
    assert_refused(pulled, RegistryError, "demo@v1 is damaged", "weights.bin")  # never the original's intact file
    served = tftrain(copy, "serve", "demo@v1", "--port", "0")
    assert_refused(served, RegistryError, "demo@v1 is damaged", "weights.bin")
    shown = tftrain(copy, "runs", "show", "demo-1")
    assert_clean(shown)
    assert f"directory: {copy / 'runs' / 'demo-1'}" in shown.stdout
    assert_clean(tftrain(history, "models", "pull", "demo@v1", "-o", str(tmp_path / "from-original")))

    (copy / "models" / "demo" / "v1" / "model" / "weights.bin").write_bytes(b"\0" * 64)  # intact again
    shutil.rmtree(history)  # the original is gone
    with nothing_written_outside(tmp_path, copy, tmp_path / "out2"):
        results = [
            tftrain(copy, *args)
            for args in (["models"], ["runs"], ["doctor"], ["models", "pull", "demo@v1", "-o", str(tmp_path / "out2")])
        ]
    for result in results:
        assert_clean(result)
    assert ": ok (1 run, 1 model version)" in results[2].stdout + results[2].stderr
    assert (tmp_path / "out2" / "weights.bin").read_bytes() == b"\0" * 64
    assert not history.exists()


@pytest.mark.parametrize("column", ["runs.run_dir", "models.path"])
@pytest.mark.parametrize("stored", ["/etc", "/tmp/elsewhere/runs/demo-2", "../outside/runs/demo-1", "runs/../../x"])
def test_an_index_naming_a_directory_outside_the_home_is_refused(history, tmp_path, column, stored):
    import sqlite3

    table, name = column.split(".")
    with sqlite3.connect(history / "tftrain.db") as db:
        db.execute(f"UPDATE {table} SET {name} = ?", (stored,))
        db.execute("PRAGMA user_version = 0")
    db.close()
    with nothing_written_outside(tmp_path, history):
        for command in (["runs"], ["models"], ["models", "pull", "demo@v1", "-o", str(tmp_path / "out")]):
            assert_refused(
                tftrain(history, *command), HistoryError, "tftrain.db is damaged", "outside", "tftrain doctor"
            )
    assert not (tmp_path / "out").exists()
    doctor = tftrain(history, "doctor")
    assert_clean(doctor)
    assert "outside" in doctor.stdout + doctor.stderr
    assert_clean(tftrain(history, "models", "pull", "demo@v1", "-o", str(tmp_path / "out")))
