"""`tftrain replay` for real: registered SavedModels served by the real KServe server on both sides
(the serving environment of the lasting cache), the same requests to both, the report compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import serving_models
from conftest import TFTRAIN
from serving_models import NAME, BuiltModel, lasting_cache_path, register_version

saved_model = serving_models.saved_model

# the fixture's model with its inputs rescaled first (x → 1 − 3x): the same weights, a preprocessing change
VARIANT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    import keras, tensorflow as tf
    out, width = Path(sys.argv[1]), int(sys.argv[2])
    keras.utils.set_random_seed(7)
    inputs = keras.Input((width,), name="features")
    scaled = keras.layers.Rescaling(-3.0, offset=1.0)(inputs) if width == 64 else inputs
    hidden = keras.layers.Dense(32, activation="relu")(scaled)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(hidden))
    model.export(str(out / "saved_model"), verbose=False)
    loaded = tf.saved_model.load(str(out / "saved_model")).signatures["serving_default"]
    sample = np.random.default_rng(3).random((4, width)).astype("float32")
    np.savez(out / "sample.npz", features=sample)
    np.savez(out / "predictions.npz", **{k: v.numpy() for k, v in loaded(features=tf.constant(sample)).items()})
    print(json.dumps({"tensorflow": tf.__version__}))
    """)


def variant(tmp_path_factory, width: int) -> BuiltModel:
    root = tmp_path_factory.mktemp(f"variant-{width}")
    done = subprocess.run(
        [sys.executable, "-c", VARIANT, str(root), str(width)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return BuiltModel(root, json.loads(done.stdout.strip().splitlines()[-1])["tensorflow"])


@pytest.fixture(scope="module")
def home(saved_model, tmp_path_factory):
    """v1 and v2 the same model, v3 its inputs scaled, v4 another input width."""
    home = tmp_path_factory.mktemp("replay-home")
    register_version(home, saved_model)
    register_version(home, saved_model)
    for width in (64, 32):
        built = variant(tmp_path_factory, width)
        version = register_version(home, built, source=built.saved_model)
        if width == 32:  # the registered serving.json says the signature's width
            document = json.loads((version.path / "serving" / "serving.json").read_text())
            assert document  # registered with the fixture's signature; the server reads the model's own
    return home


@pytest.fixture
def requests(tmp_path):
    rows = np.random.default_rng(11).random((40, 64)).round(4).tolist()
    path = tmp_path / "requests.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"r-{i}", "body": {"instances": [row]}}) + "\n" for i, row in enumerate(rows))
    )
    return path


def replay(home, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TFTRAIN_HOME": str(home), "TFTRAIN_CACHE_DIR": str(lasting_cache_path()), "COLUMNS": "200"}
    return subprocess.run([TFTRAIN, "replay", *args], capture_output=True, text=True, env=env, timeout=900)


def test_the_same_model_agrees_on_every_request(home, requests, tmp_path):
    done = replay(
        home,
        str(requests),
        "--candidate",
        f"{NAME}@v2",
        "--baseline",
        f"{NAME}@v1",
        "--min-agreement",
        "1",
        "-o",
        str(tmp_path / "replay.json"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"replayed 40 requests of {requests}: 100.0% same class, max |Δ| 0" in done.stdout
    report = json.loads((tmp_path / "replay.json").read_text())
    assert (report["answered"], report["agreed"], report["by"], report["disagreeing"]) == (40, 40, "top_class", 0)
    assert report["candidate_latency"]["p99_ms"] > 0 and report["baseline_latency"]["p99_ms"] > 0
    assert "Traceback" not in done.stdout + done.stderr


def test_a_preprocessing_change_is_refused_naming_the_requests_that_flipped(home, requests):
    done = replay(
        home,
        str(requests),
        "--candidate",
        f"{NAME}@v3",
        "--baseline",
        f"{NAME}@v1",
        "--min-agreement",
        "0.99",
        "--json",
    )
    assert done.returncode == 33, done.stdout + done.stderr
    report = json.loads(done.stdout)  # stdout holds the report alone; the way there is said on stderr
    assert f"replay: 40 requests to {NAME}@v3 and {NAME}@v1" in done.stderr
    assert report["answered"] == 40 and report["agreed"] < 36 and report["disagreeing"] == 40 - report["agreed"]
    flipped = [item["id"] for item in report["worst"]]
    assert flipped and all(name.startswith("r-") for name in flipped)
    [line] = [line for line in done.stderr.splitlines() if line.startswith("tftrain: error:")]
    assert "below min_agreement 99.0% (e.g. " in line and flipped[0] in line
    assert '"instances"' not in done.stdout  # ids, never bodies


def test_a_baseline_with_other_inputs_is_one_line_not_a_crash(home, requests):
    done = replay(home, str(requests), "--candidate", f"{NAME}@v4", "--baseline", f"{NAME}@v1")
    assert done.returncode == 33, done.stdout + done.stderr
    assert "tftrain: error: the two versions take different inputs" in done.stderr and "Traceback" not in done.stderr


def test_the_candidate_alone_answers_every_request(home, requests):
    done = replay(home, str(requests), "--candidate", f"{NAME}@v1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "against the candidate alone (no earlier version): 40 answered" in done.stdout


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "no requests in it"),
        ("not json\n", "requests.jsonl:1: not JSON"),
        ('{"id": "a", "body": 1}\n{"id": "a", "body": 2}\n', "id 'a' is used twice"),
    ],
)
def test_bad_request_files_are_one_line_before_any_server_starts(home, tmp_path, content, words):
    path = tmp_path / "requests.jsonl"
    path.write_text(content)
    done = replay(home, str(path), "--candidate", f"{NAME}@v1")
    assert done.returncode == 33 and words in done.stderr and "Traceback" not in done.stderr


def _server_of(role: str, ancestor: int) -> int | None:
    """The pid of the model server a replay under `ancestor` started for `role` (candidate, baseline)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            parent = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == ancestor and b"runner.serving.server" in argv and any(f"/{role}/".encode() in a for a in argv):
            return int(entry)
    return None


def test_a_server_that_dies_during_the_replay_is_one_line_with_its_log_and_the_rest_unsent(home, tmp_path):
    rows = np.random.default_rng(5).random((4000, 64)).round(3).tolist()
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"r-{i}", "body": {"instances": [row]}}) + "\n" for i, row in enumerate(rows))
    )
    env = {**os.environ, "TFTRAIN_HOME": str(home), "TFTRAIN_CACHE_DIR": str(lasting_cache_path())}
    command = [
        TFTRAIN,
        "replay",
        str(path),
        "--candidate",
        f"{NAME}@v2",
        "--baseline",
        f"{NAME}@v1",
        "--concurrency",
        "1",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as replaying:
        assert replaying.stdout is not None and replaying.stderr is not None
        for line in replaying.stdout:  # "replay: 4000 requests to …": both servers are up, the sending starts
            if line.startswith("replay: 4000 requests"):
                break
        victim = _server_of("candidate", replaying.pid)
        assert victim is not None
        os.kill(victim, 9)
        out, err = replaying.communicate(timeout=300)
    assert replaying.returncode == 33, out + err
    [said] = [line for line in err.splitlines() if line.startswith("tftrain: error:")]
    assert f"{NAME}@v2's model server ended during the replay (killed by signal 9) after answering" in said
    log = said.rsplit("(log: ", 1)[1].rstrip(")")
    assert log.endswith("candidate.log") and os.path.isfile(log)  # kept: the replay failed
    answered = int(said.split("after answering ")[1].split(" ")[0])
    assert answered < 4000 and "Traceback" not in err
    shutil.rmtree(os.path.dirname(log))
