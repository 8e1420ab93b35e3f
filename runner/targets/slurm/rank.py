"""One task of a Slurm job, inside the allocation: `python rank.py JOB_DIR`, started by `srun` once
per task. The standard library only: it runs in the job's Python (a virtualenv without tftrain).

It reads its task from JOB_DIR/tasks.json by SLURM_PROCID (argv, cwd, its own variables; the
shared ones and secrets come through Slurm's environment, never a file), builds TF_CONFIG where the
job has one from the allocation (every task binds a free port on its node and writes host:port to
JOB_DIR/ports/RANK; each waits for all of them), then runs the task as its child, passes SIGTERM /
SIGINT on, and writes the exit status to JOB_DIR/exit/RANK (negative: killed by that signal), which
tftrain judges by the plan's success policy; none when the batch script is requeueing the job
(compute.slurm.time_limit, preemption): that end is no verdict, the next start is.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

RENDEZVOUS_SECONDS = 120.0
SCONTROL_SECONDS = 20.0


def node_address(node: str) -> str:
    """The node's address: its name where that resolves, else Slurm's NodeAddr for it."""
    try:
        return socket.gethostbyname(node)
    except OSError:
        pass
    try:  # a controller that does not answer must not hold the task past its rendezvous
        shown = subprocess.run(
            ["scontrol", "-o", "show", "node", node],
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            timeout=SCONTROL_SECONDS,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return node
    for word in shown.split():
        if word.startswith("NodeAddr="):
            return word.split("=", 1)[1]
    return node


def free_port() -> tuple[socket.socket, int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("", 0))
    return sock, sock.getsockname()[1]


def tf_config(addresses: list[str], roles: list[tuple[str, int]], cluster_roles: list[str], rank: int) -> str:
    """TF_CONFIG for task `rank`, in the form runner.plan.launchers.tfconfig writes."""
    cluster: dict[str, list[str]] = {}
    for (role, _), address in zip(roles, addresses):
        if role in cluster_roles:
            cluster.setdefault(role, []).append(address)
    role, index = roles[rank]
    document = {
        "cluster": {key: cluster[key] for key in sorted(cluster)},
        "task": {"type": role, "index": index},
        "environment": "cloud",
    }
    return json.dumps(document)


def rendezvous(job_dir: str, rank: int, count: int, node: str) -> list[str]:
    """Every task's host:port, once all have written theirs."""
    ports = os.path.join(job_dir, "ports")
    os.makedirs(ports, exist_ok=True)
    sock, port = free_port()
    sock.close()  # the task binds it next; a port taken meanwhile fails the job, as on the local target
    mine = os.path.join(ports, str(rank))
    with open(mine + ".tmp", "w") as handle:
        handle.write(f"{node_address(node)}:{port}")
    os.replace(mine + ".tmp", mine)
    deadline = time.monotonic() + RENDEZVOUS_SECONDS
    while True:
        found = [os.path.join(ports, str(other)) for other in range(count)]
        if all(os.path.exists(path) for path in found):
            return [open(path).read().strip() for path in found]
        if time.monotonic() > deadline:
            missing = [str(other) for other, path in enumerate(found) if not os.path.exists(path)]
            raise SystemExit(
                f"tftrain: tasks {', '.join(missing)} never started (no port after {RENDEZVOUS_SECONDS:g} s)"
            )
        time.sleep(0.05)


def task_env(job: dict, rank: int) -> dict[str, str]:
    task = job["tasks"][rank]
    env = {**os.environ, **task["env"], "TFTRAIN_RANK": str(rank)}
    metrics = env.get("TFTRAIN_METRICS_FILE")
    if metrics:
        env["TFTRAIN_METRICS_FILE"] = metrics.replace("{rank}", str(rank))
    if job.get("tf_config"):
        roles = [(t["role"], t["index"]) for t in job["tasks"]]
        addresses = rendezvous(job["dir"], rank, len(roles), os.environ.get("SLURMD_NODENAME", "localhost"))
        env["TF_CONFIG"] = tf_config(addresses, roles, job["cluster_roles"], rank)
    return env


def write_exit(job_dir: str, rank: int, code: int) -> None:
    exits = os.path.join(job_dir, "exit")
    os.makedirs(exits, exist_ok=True)
    path = os.path.join(exits, str(rank))
    with open(path + ".tmp", "w") as handle:
        handle.write(str(code))
    os.replace(path + ".tmp", path)


def requeued(job_dir: str) -> bool:
    """Whether the batch script is requeueing this start of the job (compute.slurm.time_limit, or
    preemption): the task's end is then no verdict, and no exit status is written."""
    restart = os.environ.get("SLURM_RESTART_COUNT", "0")
    return restart.isdigit() and os.path.exists(os.path.join(job_dir, "requeue", restart))


def rank_of(job: dict, procid: int, component: int | None) -> int:
    """The plan's rank of the task Slurm numbers `procid` (in `component`'s step of a heterogeneous job)."""
    return procid if component is None else job["components"][component][procid]


def main(argv: list[str]) -> int:
    job_dir = argv[1]
    with open(os.path.join(job_dir, "tasks.json")) as handle:
        job = json.load(handle)
    component = int(argv[2]) if len(argv) > 2 else None
    rank = rank_of(job, int(os.environ["SLURM_PROCID"]), component)
    task = job["tasks"][rank]
    env = task_env(job, rank)
    try:
        child = subprocess.Popen(task["argv"], cwd=task["cwd"], env=env)
    except OSError as exc:
        print(f"tftrain: cannot start {task['argv'][0]}: {exc.strerror}", file=sys.stderr, flush=True)
        write_exit(job_dir, rank, 127)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda number, frame: child.send_signal(number))
    code = child.wait()
    if requeued(job_dir):
        print(f"tftrain: task {rank} stopped for the job's requeue (exit code {code})", file=sys.stderr, flush=True)
        return code if code >= 0 else 128 - code
    write_exit(job_dir, rank, code)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
