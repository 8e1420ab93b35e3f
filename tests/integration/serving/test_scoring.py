"""Azure scoring scripts for real: the Azure-style Keras example (examples/azure-keras-scoring)
trained, gated (init() + run() on its sample request) and registered once per session; then served
by `tftrain serve` on azmlinfsrv (the scoring environment built once, in the lasting cache) and
called with and without the key; a hostile request of each kind; a script that fails the gate; and
the serving image built from the local base image and smoke-tested by `tftrain deploy`."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, REPO, TFTRAIN
from serving_models import lasting_cache_path
from test_serve import free_port

EXAMPLE = REPO / "examples" / "azure-keras-scoring"
NAME = "azure-keras-scoring"
KEY = "k3y-for-the-scoring-test"


def environ(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TFTRAIN_HOME": str(home),
        "TFTRAIN_CACHE_DIR": str(lasting_cache_path()),
        "COLUMNS": "200",
        "SCORE_KEY": KEY,
    }


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """The example as a user has it, trained and registered: (home, source)."""
    root = tmp_path_factory.mktemp("azure-scoring")
    source = root / "example"
    shutil.copytree(EXAMPLE, source)
    home = root / "home"
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(source / "tftrain.yml")],
        capture_output=True,
        text=True,
        env=environ(home),
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "model gate: scoring script score.py: init() ran" in result.stdout + result.stderr
    return home, source


class Served:
    def __init__(self, home: Path, *options: str, ref: str = f"{NAME}@v1", env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [TFTRAIN, "serve", ref, "--port", str(self.port), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env or environ(home),
        )
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True).start()
        deadline = time.monotonic() + 900
        while not any("is ready:" in line for line in self.lines):
            assert self.process.poll() is None and time.monotonic() < deadline, "".join(self.lines[-40:])
            time.sleep(0.2)

    def post(
        self, body: bytes, key: str | None = None, path: str = "/score", headers: dict | None = None
    ) -> tuple[int, object]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {key}"} if key else {}),
                **(headers or {}),
            }
            connection.request("POST", path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(60)


@pytest.fixture(scope="module")
def served(trained):
    running = Served(trained[0], "--auth-token-env", "SCORE_KEY", "--max-body-bytes", "100000")
    yield running
    assert running.stop() == 0, "".join(running.lines[-20:])


def test_score_answers_class_indices_with_the_key_only(served, trained):
    sample = (trained[1] / "sample-request.json").read_bytes()
    assert served.post(sample, KEY) == (200, [0, 1])  # load_digits' first two rows are a 0 and a 1
    assert served.post(sample)[0] == 401
    assert served.post(sample, "not-the-key")[0] == 401
    assert served.post(sample, KEY + "x")[0] == 401
    assert not any(KEY in line for line in served.lines)


def test_hostile_requests_are_one_json_line_with_the_right_status(served):
    rejected = served.post(b'{"rows": [[1, 2]]}', KEY)
    assert rejected[0] == 400 and rejected[1]["message"].startswith(
        "the scoring script rejected the request: KeyError: 'data' (score.py:"
    )
    not_json = served.post(b"{not json", KEY)
    assert not_json[0] == 400 and "JSONDecodeError" in not_json[1]["message"]
    wrong_shape = served.post(json.dumps({"data": [[1.0] * 3]}).encode(), KEY)
    assert wrong_shape[0] == 400 and "Traceback" not in json.dumps(wrong_shape[1])
    assert served.post(b"[" + b"0," * 60000 + b"0]", KEY)[0] == 413
    assert served.post(b"{}", KEY, path="/v2/repository/models/x/unload")[0] == 404
    # the server is still there for the next client
    assert served.post(json.dumps({"data": [[0.0] * 64]}).encode(), KEY)[0] == 200


def test_a_version_registered_with_auth_needs_a_key_to_start(trained):
    result = subprocess.run(
        [TFTRAIN, "serve", f"{NAME}@v1", "--port", "0"],
        capture_output=True,
        text=True,
        env=environ(trained[0]),
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"tftrain: error: {NAME}@v1 was registered with model.serving.auth: true: give the key with --auth-token-env"
        " NAME"
    )


def test_a_script_that_fails_init_fails_the_run_with_its_line(trained, tmp_path):
    source = tmp_path / "broken"
    shutil.copytree(trained[1], source, ignore=shutil.ignore_patterns("outputs", "logs"))
    score = (source / "score.py").read_text().replace('"model.json"', '"missing.json"')
    (source / "score.py").write_text(score)
    home = tmp_path / "home"
    result = subprocess.run(
        [TFTRAIN, "run", "-f", str(source / "tftrain.yml")],
        capture_output=True,
        text=True,
        env=environ(home),
        timeout=1800,
    )
    assert result.returncode != 0
    line = next(line for line in result.stderr.splitlines() if line.startswith("tftrain: error:"))
    assert (
        "scoring script score.py: init() raised FileNotFoundError" in line
        and "missing.json" in line
        and "(score.py:15)" in line
    )
    assert not (home / "models" / NAME / "v1").exists()


def test_the_scoring_server_is_never_half_up(trained, tmp_path):
    """Straight on the scoring environment `tftrain serve` built: a script without run(), or whose
    init() raises, ends the server before its port answers, with one line."""
    from runner.environments import scoring_spec

    python = lasting_cache_path() / "envs" / scoring_spec("2.18.1", ("numpy",)).key / "bin" / "python"
    assert python.is_file()
    for script, told in [
        ("def init():\n    pass\n", "does not have a run() function"),
        (
            "def init():\n    raise OSError('disk gone')\n\ndef run(d):\n    return d\n",
            "init() raised OSError: disk gone (score.py:2)",
        ),
    ]:
        version = tmp_path / "version"
        shutil.rmtree(version, ignore_errors=True)
        (version / "model").mkdir(parents=True)
        (version / "scoring").mkdir()
        (version / "serving").mkdir()
        (version / "scoring" / "score.py").write_text(script)
        (version / "serving" / "serving.json").write_text(json.dumps({"scoring": {"script": "score.py"}}))
        result = subprocess.run(
            [
                str(python),
                "-m",
                "runner.serving.scoring.server",
                "--model-dir",
                str(version),
                "--name",
                "x",
                "--port",
                "0",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=120,
        )
        assert result.returncode == 3, result.stderr[-2000:]
        errors = [line for line in result.stderr.splitlines() if line.startswith("tftrain-serve: error:")]
        assert len(errors) == 1 and told in errors[0], result.stderr[-2000:]


def test_deploy_builds_the_image_and_smoke_tests_score(trained, docker_client):
    result = subprocess.run(
        [TFTRAIN, "deploy", f"{NAME}@v1", "--image", "tftrain-test/scoring", "--base-image", BASE_IMAGE],
        capture_output=True,
        text=True,
        env=environ(trained[0]),
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "smoke test: /score answers the sample request as run() did in the gate" in result.stdout + result.stderr


def test_a_published_scoring_version_is_served_from_its_release(trained, github_api, tmp_path):
    """The release carries the script (scoring.tar.gz, in SHA256SUMS, named by the model card); a
    machine with no registry serves it from the release as `tftrain serve NAME@v1` does."""
    import hashlib

    home, source = trained
    github = {"GITHUB_REPOSITORY": "octo/models", "GITHUB_API_URL": github_api.url, "GITHUB_TOKEN": "ghs_test"}
    published = subprocess.run(
        [TFTRAIN, "publish", "--run", f"{NAME}-1"],
        capture_output=True,
        text=True,
        env={**environ(home), **github},
        timeout=600,
    )
    assert published.returncode == 0, published.stdout[-2000:] + published.stderr[-2000:]
    (release,) = github_api.releases
    assets = {a["name"]: github_api.assets[a["id"]][1] for a in release["assets"]}
    sums = dict(line.split()[::-1] for line in assets["SHA256SUMS"].decode().splitlines())
    assert hashlib.sha256(assets["scoring.tar.gz"]).hexdigest() == sums["scoring.tar.gz"]
    card = assets["MODEL_CARD.md"].decode()
    assert "- `scoring.tar.gz`" in card and "Scoring script: `score.py`" in card

    elsewhere = {**environ(tmp_path / "elsewhere"), **github}
    running = Served(tmp_path / "elsewhere", "--auth-token-env", "SCORE_KEY", ref=f"release:{NAME}@v1", env=elsewhere)
    try:
        assert any("scoring script score.py on azmlinfsrv" in line for line in running.lines), "".join(
            running.lines[-20:]
        )
        sample = (source / "sample-request.json").read_bytes()
        assert running.post(sample, KEY) == (200, [0, 1])
        assert running.post(sample)[0] == 401
    finally:
        assert running.stop() == 0, "".join(running.lines[-20:])
    assert not (tmp_path / "elsewhere" / "models").exists()  # served from the release, not a registry


def test_score_requests_are_recorded_and_replayed_on_score(trained, tmp_path):
    """--record on Azure's /score, and the recording replayed against the version itself: the same answers."""
    from runner.serving.records import Route, read_requests

    recorded = tmp_path / "recorded"
    running = Served(trained[0], "--auth-token-env", "SCORE_KEY", "--record", str(recorded))
    sample = (trained[1] / "sample-request.json").read_bytes()
    try:
        assert running.post(sample, KEY) == (200, [0, 1])
        assert running.post(sample)[0] == 401  # refused: never recorded
        assert running.post(json.dumps({"data": [[0.0] * 64]}).encode(), KEY)[0] == 200
    finally:
        assert running.stop() == 0
    requests = read_requests(recorded)
    assert [(r.route, r.recorded["answer"]) for r in requests][0] == (Route.SCORE, [0, 1]) and len(requests) == 2
    done = subprocess.run(
        [
            TFTRAIN,
            "replay",
            str(recorded),
            "--candidate",
            f"{NAME}@v1",
            "--baseline",
            f"{NAME}@v1",
            "--min-agreement",
            "1",
        ],
        capture_output=True,
        text=True,
        env=environ(trained[0]),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replayed 2 requests" in done.stdout and "100.0% same answer" in done.stdout
