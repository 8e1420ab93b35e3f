"""Publishing a large model: package (tar.gz) + checksum + upload to S3 (moto's server, a separate
process), and the release's small assets to a GitHub-protocol server. Baseline, in the same run:
`tar cf` + `sha256sum` of the same directory. Prints the data path's throughput (the same pack,
sha256 and S3 upload functions `tftrain publish` calls) and its ratio to the baseline (goal ≥ 0.8),
the whole `tftrain publish` (which adds the release's API calls: PyGithub spaces writes a second
apart, as GitHub asks) and its peak RSS (goal ≤ 150 MB).

    .venv/bin/python bench/publish.py [--gib 2]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "tests"))

from github_api import GitHubAPI  # noqa: E402  (the tests' GitHub-protocol server)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_model(directory: Path, total: int) -> None:
    directory.mkdir(parents=True)
    chunk = os.urandom(64 << 20)
    for index in range((total + len(chunk) - 1) // len(chunk)):
        (directory / f"shard-{index:03d}.bin").write_bytes(chunk[: min(len(chunk), total - index * len(chunk))])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    size = int(args.gib * (1 << 30))
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        root = Path(tmp)
        source = root / "project" / "src"
        source.mkdir(parents=True)
        (source / "train.py").write_text("print('Epoch 1/1')\nprint('1/1 - 0s - loss: 0.5')\n")
        write_model(source / "outputs" / "model", size)  # the "training" output, made beforehand
        (root / "project" / "tftrain.yml").write_text(
            "name: big\nsource_directory: src\nentry_script: train.py\noutputs_dir: outputs\n"
        )
        started = time.perf_counter()
        subprocess.run(f"tar cf - -C {source / 'outputs' / 'model'} . | sha256sum > /dev/null", shell=True, check=True)
        baseline = time.perf_counter() - started

        port = free_port()
        moto = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        api = GitHubAPI().start()
        env = {
            **os.environ,
            "TFTRAIN_HOME": str(root / "home"),
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "x",
            "AWS_DEFAULT_REGION": "us-east-1",
            "GITHUB_REPOSITORY": "octo/models",
            "GITHUB_API_URL": api.url,
            "GITHUB_TOKEN": "ghs_test",
            "INPUT_S3_BUCKET": "models",
            "INPUT_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        }
        try:
            time.sleep(1.5)
            data_path, raw = _data_path(source / "outputs" / "model", root, port, env)
            subprocess.run(
                [
                    str(BIN / "python"),
                    "-c",
                    (
                        "import boto3; boto3.client('s3',"
                        f" endpoint_url='http://127.0.0.1:{port}').create_bucket(Bucket='models')"
                    ),
                ],
                env=env,
                check=True,
            )
            # the run copies the model (the snapshot keeps outputs out; write it where the script would)
            subprocess.run(
                [str(BIN / "tftrain"), "run", "-f", str(root / "project" / "tftrain.yml")],
                env=env,
                check=True,
                capture_output=True,
            )
            run_outputs = root / "home" / "runs" / "big-1" / "workdir" / "outputs"
            shutil.rmtree(run_outputs)
            shutil.move(str(source / "outputs"), str(run_outputs))
            started = time.perf_counter()
            command = [str(BIN / "tftrain"), "publish", "--run", "big-1"]
            if os.environ.get("BENCH_PROFILE"):
                command = [str(BIN / "python"), "-m", "cProfile", "-s", "cumtime", *command]
            timed = subprocess.run(["/usr/bin/time", "-v", *command], env=env, capture_output=True, text=True)
            if os.environ.get("BENCH_PROFILE"):
                print("\n".join(timed.stdout.splitlines()[:45]))
            elapsed = time.perf_counter() - started
        finally:
            api.stop()
            moto.terminate()
        if timed.returncode != 0:
            raise SystemExit(timed.stdout[-2000:] + timed.stderr[-2000:])
        rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", timed.stderr)[1]) / 1024
    mib = size / (1 << 20)
    print(f"baseline tar cf + sha256sum: {mib / baseline:,.0f} MiB/s ({baseline:.1f}s for {mib:,.0f} MiB)")
    print(
        f"data path (tar.gz + sha256 + multipart S3 upload to moto): {mib / data_path:,.0f} MiB/s ({data_path:.1f}s), "
        f"ratio {baseline / data_path:.2f} (goal ≥ 0.8)"
    )
    print(
        f"moto alone takes the same bytes at {mib / raw:,.0f} MiB/s: against this server no data path can beat "
        f"ratio {baseline / raw:.2f}; tftrain's path reaches {raw / data_path:.0%} of that ceiling"
    )
    print(f"whole tftrain publish, release API calls included: {elapsed:.1f}s; peak RSS {rss:.0f} MB (goal ≤ 150)")


def _data_path(model: Path, root: Path, port: int, env: dict) -> float:
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")})
    import boto3

    from runner.history.packing import pack
    from runner.storage.s3 import S3Target, upload

    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
    started = time.perf_counter()
    digest = pack(model, root / "model.tar.gz")  # hashes as it writes
    packed = time.perf_counter()
    upload(S3Target("bench", endpoint_url=endpoint), root / "model.tar.gz", "model.tar.gz", digest)  # uploads, checks
    elapsed = time.perf_counter() - started
    print(f"  of which: pack + sha256 {packed - started:.1f}s, S3 upload + check {elapsed - (packed - started):.1f}s")
    # The server's own ceiling: the same bytes, one plain boto3 upload_file, nothing of tftrain's.
    clock = time.perf_counter()
    boto3.client("s3", endpoint_url=endpoint).upload_file(str(root / "model.tar.gz"), "bench", "raw.tar.gz")
    raw = time.perf_counter() - clock
    print(f"  moto's own ceiling (plain boto3 upload of the same file): {raw:.1f}s")
    (root / "model.tar.gz").unlink()
    return elapsed, raw


if __name__ == "__main__":
    main()
