"""Time from `tftrain run` to the training script's first line, docker target, warm cache.

Measured twice: with an unchanged manifest, and after editing only the training script. Both
must start without any image build. Baseline, in the same process: the bare `docker run` of the
same image and command through the docker SDK (what a container start costs at least).
Goal: ≤ 2 s and zero builds in both cases.

    scripts/docker-up && .venv/bin/python bench/prepare.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker

TFTRAIN = str(Path(sys.executable).parent / "tftrain")
BASE_IMAGE = os.environ.get("TFTRAIN_TEST_BASE_IMAGE", "tftrain-test/bookworm:latest")
SCRIPT = "import time\nprint('FIRST', time.time(), flush=True)\n"


def first_line_after(start: float, log: Path) -> float:
    for line in log.read_text().splitlines():
        if line.startswith("FIRST "):
            return float(line.split()[1]) - start
    raise RuntimeError(f"no first line in {log}")


def run_once(manifest: Path, home: Path, env: dict) -> tuple[float, bool]:
    start = time.time()
    result = subprocess.run([TFTRAIN, "run", "-f", str(manifest)], capture_output=True, text=True, env=env, check=True)
    log = sorted((home / "runs").glob("*/workdir/logs/0.log"), key=lambda p: p.stat().st_mtime)[-1]
    return first_line_after(start, log), "building image" in result.stdout


def bare_docker(image: str) -> float:
    client = docker.from_env()
    start = time.time()
    output = client.containers.run(image, ["/opt/tftrain/venv/bin/python", "-c", SCRIPT], remove=True)
    return float(output.decode().split()[1]) - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "src" / "train.py").write_text(SCRIPT)
        manifest = root / "tftrain.yml"
        manifest.write_text(
            "name: prepare-bench\nsource_directory: src\nentry_script: train.py\nuse_docker: true\n"
            f"custom_docker_image: {BASE_IMAGE}\nframework_version: '2.18'\npip_packages: [scikit-learn]\n"
        )
        env = {**os.environ, "TFTRAIN_HOME": str(root / "home")}
        run_once(manifest, root / "home", env)  # warm-up: builds the image if this machine has none
        lock = next((root / "home").glob("runs/*/manifest.lock.yml")).read_text()
        image = next(line.split()[-1] for line in lock.splitlines() if line.strip().startswith("image: tftrain/"))
        results = {}
        for case in ("unchanged manifest", "training script edited"):
            times, builds = [], 0
            for round_no in range(args.rounds):
                if case == "training script edited":
                    (root / "src" / "train.py").write_text(SCRIPT + f"# edit {round_no}\n")
                latency, built = run_once(manifest, root / "home", env)
                times.append(latency)
                builds += built
            results[case] = (statistics.median(times), builds)
        bare = statistics.median(bare_docker(image) for _ in range(args.rounds))
    print(f"baseline: bare container start to first line {bare:.2f}s (image {image})")
    for case, (median, builds) in results.items():
        print(
            f"{case}: tftrain run → first line {median:.2f}s median of {args.rounds}, {builds} builds"
            f"  (goal ≤ 2 s, 0 builds; ratio to bare container {median / bare:.2f})"
        )


if __name__ == "__main__":
    main()
