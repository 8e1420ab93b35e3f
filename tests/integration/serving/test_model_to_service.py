"""The whole way from training to a service, for real: a Keras model trained and checked by the
gate (ONNX export on), published to a release (the GitHub REST stand-in), then served from that
release with ONNX Runtime by KServe: the release's sample answers as the gate recorded."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time

import numpy as np
from conftest import TFTRAIN
from test_gate import SCRIPT
from test_serve import free_port


def test_trained_published_and_served_from_the_release(project, home, tmp_path, github_api, lasting_cache):
    env = {
        **os.environ,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
        "COLUMNS": "200",
    }
    path = project(
        SCRIPT,
        "environment_variables: {MODE: keras}\nmodel:\n  sample_input: sample.npy\n  export: [onnx]\n",
        name="gated",
    )
    np.save(path.parent / "src" / "sample.npy", np.full((2, 8), 0.5, np.float32))
    trained = subprocess.run([TFTRAIN, "run", "-f", str(path)], capture_output=True, text=True, env=env, timeout=1200)
    assert trained.returncode == 0, trained.stderr[-3000:]
    published = subprocess.run(
        [TFTRAIN, "publish", "--run", "gated-1"], capture_output=True, text=True, env=env, timeout=300
    )
    assert published.returncode == 0, published.stderr[-3000:]
    (release,) = github_api.releases
    names = {asset["name"] for asset in release["assets"]}
    assert {"serving.json", "serving-sample.npz", "serving-predictions.npz", "model.onnx"} <= names
    assert "## Serving" in release["body"] and "ONNX Runtime matches TensorFlow" in release["body"]

    port = free_port()
    server = subprocess.Popen(
        [TFTRAIN, "serve", "release:gated@latest", "--runtime", "onnx", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "TFTRAIN_HOME": str(tmp_path / "elsewhere")},
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True).start()
    try:
        deadline = time.monotonic() + 900
        while not any("is ready:" in line for line in lines):
            assert server.poll() is None and time.monotonic() < deadline, "".join(lines[-40:])
            time.sleep(0.2)
        assert any("sample prediction matches serving/predictions.npz" in line for line in lines), "".join(lines[-40:])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request(
            "POST",
            "/v1/models/gated:predict",
            body=json.dumps({"instances": [[0.5] * 8] * 2}),
            headers={"Content-Type": "application/json"},
        )
        answer = json.loads(connection.getresponse().read())
        predictions = np.load(home / "runs" / "gated-1" / "serving" / "predictions.npz")["output_0"]
        np.testing.assert_allclose(answer["predictions"], predictions, atol=1e-4)
    finally:
        server.terminate()
        assert server.wait(60) == 0, "".join(lines[-40:])
