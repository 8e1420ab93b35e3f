"""What tftrain's launchers add to a distributed job, against launching it by hand.

For each example job (Horovod over mpirun, parameter servers, multi-worker mirrored) it times
`tftrain run` and the same training started by hand — a plain mpirun line, or processes with
hand-written TF_CONFIGs — alternating, in this process. Goal: ≤ 1 s added.

    .venv/bin/python bench/launchers.py [--rounds N]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
THREADS = {"TF_NUM_INTEROP_THREADS": "2", "TF_NUM_INTRAOP_THREADS": "1", "OMP_NUM_THREADS": "1"}


def python_for(example: str) -> str:
    """The interpreter tftrain would use (it builds the Horovod environment on first use)."""
    plan = json.loads(
        subprocess.check_output([TFTRAIN, "plan", "--json", "-f", str(REPO / "examples" / example / "tftrain.yml")])
    )
    return plan["tasks"][0]["argv"][0]


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def by_hand_mpi(python: str, workdir: Path) -> None:
    """horovodrun's own mpirun line, output to a log file, as a careful user would write it."""
    with (workdir / "mpirun.log").open("wb") as log:
        subprocess.run(
            [
                "mpirun",
                "--allow-run-as-root",
                "-np",
                "2",
                "-H",
                "localhost:2",
                "-bind-to",
                "none",
                "-map-by",
                "slot",
                "-mca",
                "pml",
                "ob1",
                "-mca",
                "btl",
                "^openib",
                "-x",
                "TF_USE_LEGACY_KERAS=1",
                "-x",
                "PYTHONUNBUFFERED=1",
                python,
                "train.py",
                "--epochs",
                "4",
            ],
            cwd=workdir,
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def by_hand_tf_config(
    python: str, workdir: Path, roles: list[tuple[str, int]], args: list[str], wait_for: list[int]
) -> None:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(len(roles))]
    cluster: dict[str, list[str]] = {}
    for (role, _), address in zip(roles, addresses):
        cluster.setdefault(role, []).append(address)
    processes = []
    for role, index in roles:
        env = {
            **os.environ,
            **THREADS,
            "PYTHONUNBUFFERED": "1",
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": role, "index": index}}),
        }
        with (workdir / f"{role}-{index}.log").open("wb") as log:  # one log per task, as a careful user would keep
            processes.append(
                subprocess.Popen(
                    [python, "train.py", *args], cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    for index in wait_for:
        if processes[index].wait() != 0:
            raise RuntimeError(f"task {roles[index]} failed")
    for process in processes:
        process.kill()
        process.wait()


JOBS = {
    "horovod-keras": lambda python, workdir: by_hand_mpi(python, workdir),
    "parameter-server": lambda python, workdir: by_hand_tf_config(
        python, workdir, [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0)], ["--steps", "40"], [0]
    ),
    "multi-worker": lambda python, workdir: by_hand_tf_config(
        python, workdir, [("worker", 0), ("worker", 1)], [], [0, 1]
    ),
}


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TFTRAIN_HOME": str(Path(tmp) / "home")}
        for example, by_hand in JOBS.items():
            manifest = REPO / "examples" / example / "tftrain.yml"
            subprocess.run([TFTRAIN, "run", "-f", str(manifest)], env=env, check=True, capture_output=True)  # warm-up
            python = python_for(example)
            workdir = Path(tmp) / example
            shutil.copytree(REPO / "examples" / example, workdir)
            (workdir / "outputs").mkdir()
            hand, tool = [], []
            bare = functools.partial(by_hand, python, workdir)
            through = functools.partial(
                subprocess.run, [TFTRAIN, "run", "-f", str(manifest)], env=env, check=True, capture_output=True
            )
            for _ in range(args.rounds):
                hand.append(timed(bare))
                tool.append(timed(through))
            h, t = statistics.median(hand), statistics.median(tool)
            print(
                f"{example}: by hand {h:.2f}s, tftrain run {t:.2f}s, added {t - h:+.2f}s (goal ≤ 1 s), ratio"
                f" {t / h:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
