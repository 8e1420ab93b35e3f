"""An input of several https files (Azure's `Dataset.File.from_files(path=[four URLs])`): the
imported manifest runs as written, each file downloaded from a real HTTP server, verified and
cached by content, all in one directory; a source that fails fails the run in one line."""

from __future__ import annotations

import gzip
import hashlib

import pytest
from conftest import REPO
from hostile import assert_clean, assert_refused, nothing_written_outside

from runner.errors import PreparingError
from runner.history.checksums import format_sums

pytestmark = pytest.mark.integration

AZURE = "https://azureopendatasets.blob.core.windows.net/mnist/"
FILES = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]
READER = """\
import argparse, gzip, os
parser = argparse.ArgumentParser()
parser.add_argument("--data-folder")
parser.add_argument("--batch-size", type=int)
parser.add_argument("--first-layer-neurons", type=int)
args = parser.parse_args()
for name in sorted(os.listdir(args.data_folder)):
    print("file", name, len(gzip.open(os.path.join(args.data_folder, name)).read()))
"""


@pytest.fixture
def imported(tmp_path, http_server, cli):
    """Azure's how-to script with its URLs on the local server, imported into tmp_path/project."""
    root, base_url = http_server
    (root / "mnist").mkdir()
    for size, name in enumerate(FILES, start=1):
        (root / "mnist" / name).write_bytes(gzip.compress(bytes(size * 100)))
    project = tmp_path / "project"
    (project / "tf-mnist").mkdir(parents=True)
    (project / "tf-mnist" / "tf_mnist.py").write_text(READER)
    script = (
        (REPO / "tests" / "data" / "azureml" / "tf_dataset_urls.py").read_text().replace(AZURE, f"{base_url}/mnist/")
    )
    (project / "job.py").write_text(script)
    result = cli("import", "azureml", str(project / "job.py"), "-o", str(project / "tftrain.yml"), cwd=project)
    assert_clean(result)
    return project / "tftrain.yml", base_url


def test_the_imported_how_to_downloads_its_four_files_into_one_directory(imported, cli, home, env_cache):
    manifest, base_url = imported
    first = cli("run", "-f", str(manifest))
    assert_clean(first)
    log = (home / "runs/tf-mnist-urls-1/workdir/logs/0.log").read_text()
    assert [line.split()[1:] for line in log.splitlines() if line.startswith("file ")] == [
        ["t10k-images-idx3-ubyte.gz", "300"], ["t10k-labels-idx1-ubyte.gz", "400"],
        ["train-images-idx3-ubyte.gz", "100"], ["train-labels-idx1-ubyte.gz", "200"],
    ]  # fmt: skip
    for index in range(4):
        assert f"inputs.mnist_dataset.source[{index}]: {base_url}/mnist/" in first.stdout
    assert "inputs.mnist_dataset.source: 4 files →" in first.stdout
    second = cli("run", "-f", str(manifest))
    assert_clean(second)
    assert second.stdout.count("(cached, sha256") == 4
    served = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in _served(manifest)}
    directory = env_cache / "data" / "sha256" / hashlib.sha256(format_sums(served).encode()).hexdigest()
    assert sorted(p.name for p in directory.iterdir()) == sorted(FILES)  # one directory, by its SHA256SUMS
    assert f"(sha256 {directory.name[:12]})" in first.stdout


def _served(manifest):
    www = manifest.parent.parent / "www" / "mnist"
    return [(path.name, path) for path in sorted(www.iterdir())]


def test_a_failing_source_fails_the_run_in_one_line_and_leaves_no_partial_directory(
    imported, cli, home, tmp_path, env_cache
):
    manifest, base_url = imported
    (tmp_path / "www" / "mnist" / FILES[2]).unlink()
    with nothing_written_outside(tmp_path / "project"):
        result = cli("run", "-f", str(manifest))
    assert_refused(result, PreparingError, f"inputs.mnist_dataset.source[2]: {base_url}/mnist/{FILES[2]}: HTTP 404")
    assert not list((env_cache / "data").glob("download-*")), "a staging directory was left behind"


def test_a_pinned_list_is_checked_as_a_whole(imported, cli):
    manifest, _base_url = imported
    text = manifest.read_text().replace("    mode: mount\n", f"    mode: mount\n    sha256: '{'0' * 64}'\n")
    manifest.write_text(text)
    result = cli("run", "-f", str(manifest))
    assert_refused(
        result,
        PreparingError,
        "inputs.mnist_dataset.source: the SHA256SUMS of its 4 files has sha256",
        "expects 000000",
    )


@pytest.fixture
def https_server(tmp_path):
    """tmp_path/www over HTTPS on 127.0.0.1 with a self-signed certificate; yields (root, base
    URL, the certificate) — trusted through SSL_CERT_FILE, as on a runner with a private CA."""
    import functools
    import http.server
    import shutil
    import ssl
    import subprocess
    import threading

    root, certs = tmp_path / "www", tmp_path / "certs"
    root.mkdir(exist_ok=True)
    certs.mkdir()
    subprocess.run(
        [shutil.which("openssl") or "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(certs / "key.pem"), "-out", str(certs / "cert.pem")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "cert.pem", certs / "key.pem")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"https://127.0.0.1:{server.server_address[1]}", certs / "cert.pem"
    server.shutdown()


def test_several_https_sources_over_tls_reach_one_directory(https_server, stand_in_project, cli, home, monkeypatch):
    root, base_url, cert = https_server
    for size, name in enumerate(FILES, start=1):
        (root / name).write_bytes(gzip.compress(bytes(size * 10)))
    sources = "".join(f"      - {base_url}/{name}\n" for name in FILES)
    manifest = stand_in_project(
        script=READER,
        manifest=f"inputs:\n  mnist:\n    source:\n{sources}script_params:\n  --data-folder: {{input: mnist}}\n",
    )
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    untrusted = cli("run", "-f", str(manifest))  # the certificate is checked: this is TLS for real
    assert_refused(
        untrusted, PreparingError, f"inputs.mnist.source[0]: {base_url}/{FILES[0]}", "CERTIFICATE_VERIFY_FAILED"
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    result = cli("run", "-f", str(manifest))
    assert_clean(result)
    log = (home / "runs/demo-2/workdir/logs/0.log").read_text()
    assert sorted(line.split()[1] for line in log.splitlines() if line.startswith("file ")) == sorted(FILES)
