"""`tftrain serve --record` for real (KServe): the requests answered on TensorFlow Serving's REST route
and the Open Inference Protocol are recorded as a request file `tftrain replay` reads; on a full disk
(a 64 KiB tmpfs) every request is still answered and the recording stops, said once."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import serving_models
from serving_models import INPUT, NAME, WIDTH
from test_serve import started

from runner.serving.records import read_requests

saved_model = serving_models.saved_model


def stop(server) -> str:
    server.process.terminate()
    server.process.wait(60)
    return "".join(server.lines)


def test_answered_requests_are_recorded_and_replayable(saved_model, tmp_path):
    recorded = tmp_path / "recorded"
    server = started(saved_model, tmp_path / "home", "--record", str(recorded))
    rows = np.random.default_rng(5).random((3, WIDTH)).round(3).tolist()
    try:
        for row in rows:
            assert server.request("POST", f"/v1/models/{NAME}:predict", {"instances": [row]})[0] == 200
        v2 = {"inputs": [{"name": INPUT, "shape": [1, WIDTH], "datatype": "FP32", "data": rows[0]}]}
        assert server.request("POST", f"/v2/models/{NAME}/infer", v2)[0] == 200
        # refused: not recorded
        assert server.request("POST", f"/v1/models/{NAME}:predict", {"instances": [[1.0]]})[0] == 400
    finally:
        log = stop(server)
    assert f"recording 100% of the answered requests into {recorded}" in log
    requests = read_requests(recorded)
    assert [r.route.value for r in requests] == ["v1", "v1", "v1", "v2"]
    assert requests[0].body == {"instances": [rows[0]]} and "predictions" in requests[0].recorded["answer"]
    assert all(r.recorded["status"] == 200 and r.recorded["latency_ms"] > 0 for r in requests)


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", str(mount)], check=True)


def test_a_full_disk_never_fails_a_request_and_is_said_once(saved_model, tmp_path, tiny_disk):
    server = started(saved_model, tmp_path / "home", "--record", str(tiny_disk))
    row = [0.5] * WIDTH
    try:
        statuses = [
            server.request("POST", f"/v1/models/{NAME}:predict", {"instances": [row] * 8})[0] for _ in range(300)
        ]
    finally:
        log = stop(server)
    assert statuses == [200] * 300
    assert log.count("recording stopped: No space left on device") == 1, log[-3000:]
    assert "Traceback" not in log


def test_a_record_directory_that_is_a_link_or_a_file_is_one_line_before_anything_starts(saved_model, tmp_path):
    from conftest import TFTRAIN
    from serving_models import register_version

    home = tmp_path / "home"
    register_version(home, saved_model)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file").write_text("x")
    for where, words in (("link", "a link"), ("file", "not a directory")):
        done = subprocess.run(
            [TFTRAIN, "serve", f"{NAME}@v1", "--port", "0", "--record", str(tmp_path / where)],
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "TFTRAIN_HOME": str(home)},
            timeout=120,
        )
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
