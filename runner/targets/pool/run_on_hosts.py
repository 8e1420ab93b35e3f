"""Running a placed plan on the pool's hosts, one container per task (per host for MPI).

Nothing is mounted from this machine: the run's files (snapshot, inputs, resume point, tftrain's
`runner` package) are copied into every container before it starts, and what the bind mounts
of the docker target would have brought back (outputs, logs, metrics) is copied out before the
containers are removed: outputs and logs from the chief / rank 0, logs and metrics of every
other task next to them. MPI follows Horovod's Docker recipe: every node's container runs sshd
on the plan's port in the host's network, and the first node's runs mpirun.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import tarfile
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from runner.errors import Vanished
from runner.history.checksums import skipped_note
from runner.history.states import RunStatus
from runner.plan.model import ContainerSpec, LaunchPlan, TaskSpec
from runner.settings import ArchiveLimits
from runner.targets.base import Outcome, RunControl, follow
from runner.targets.container import LABEL_RUN, Container, stop_all
from runner.targets.pool.dispatch import PoolSession
from runner.targets.pool.watch import HostWatch
from runner.targets.supervise import by_policy, supervise
from runner.telemetry.logger import Logger
from runner.telemetry.logpump import LineSink, LogPump

HOST_LOST_CODE = 255


@dataclass
class Placed:
    """One container of the job: the task it runs (None: an MPI node's sshd) and where."""

    task: TaskSpec | None
    host: str
    label: str
    container: Container
    keeps_outputs: bool = False


def execute(
    session: PoolSession,
    plan: LaunchPlan,
    pump: LogPump,
    sinks: dict[int, LineSink],
    control: RunControl,
    logger: Logger,
) -> Outcome:
    run_id = plan.tasks[0].env["TFTRAIN_RUN_ID"]
    with ExitStack() as stack:
        files = stack.enter_context(tempfile.TemporaryFile())
        keys = stack.enter_context(tempfile.TemporaryDirectory()) if plan.driver else None
        _pack(files, plan.container, _ssh_keys(Path(keys), session.hostmap.ssh_port) if keys else {})
        placed = _containers(session, plan, run_id, stack)
        watch = stack.enter_context(HostWatch(session.hosts()))
        for item in placed:
            item.container.put(files)
        _start(placed, plan, pump, sinks)
        outcome = _supervise(placed, plan, control, watch)
        _collect(placed, plan, logger, control.archive_limits)
    pump.join()
    return outcome


def _containers(session: PoolSession, plan: LaunchPlan, run_id: str, stack: ExitStack) -> list[Placed]:
    """One container per placed demand: an MPI node (node 0's runs mpirun, the others sshd), or a task."""
    tasks = {f"{task.role} {task.index}": task for task in plan.tasks}
    keeper = _output_task(plan)
    hostmap = session.hostmap
    placed = []
    for index, item in enumerate(session.placement.assignments):
        if plan.driver is not None:
            task = plan.driver if index == 0 else None
            argv = _launcher_argv(plan, hostmap) if task else _sshd_argv(hostmap.ssh_port)
            label, env, keeps = ("launcher" if task else f"node-{index}"), plan.driver.env, task is not None
        else:
            task = tasks[item.key]
            argv, label, env, keeps = task.argv, f"{task.role}-{task.index}", task.env, task is keeper
        container = Container(
            session.client(item.host),
            plan.container._replace(mounts=(), gpus=bool(item.gpu_ids)),
            argv,
            env,
            task.cwd if task else "/",
            f"tftrain-{run_id}-{label}",
            {LABEL_RUN: run_id, "tftrain.host": item.host},
            network_mode=session.job.pool.pool.host(item.host).network,
            gpu_ids=item.gpu_ids,
        )
        placed.append(Placed(task, item.host, label, stack.enter_context(container), keeps))
    return placed


def _output_task(plan: LaunchPlan) -> TaskSpec:
    """Whose outputs are the run's: the chief, else worker 0, else the first task."""
    for role in ("chief", "main", "worker"):
        for task in plan.tasks:
            if task.role == role:
                return task
    return plan.tasks[0]


def _launcher_argv(plan: LaunchPlan, hostmap) -> list[str]:
    """sshd for this node, wait until every other node's sshd answers, then mpirun."""
    port = hostmap.ssh_port
    others = [address for key, (_, address) in hostmap.hosts.items() if key != "node 0"]
    wait = (
        (
            f"for h in {' '.join(shlex.quote(a) for a in others)}; do i=0; "
            f'until ssh -p {port} -o ConnectTimeout=2 -o BatchMode=yes "$h" true 2>/dev/null; do '
            f'i=$((i+1)); if [ $i -gt 120 ]; then echo "tftrain: no sshd answers on $h:{port}" >&2; exit'
            f" {HOST_LOST_CODE}; fi; sleep 0.5; done; done; "
        )
        if others
        else ""
    )
    script = f'{_SSHD_START} -p {port}; {wait}exec "$@"'
    return ["sh", "-c", script, "tftrain-launcher", *plan.driver.argv]


_SSHD_START = "mkdir -p /run/sshd && ssh-keygen -A >/dev/null && /usr/sbin/sshd -e"


def _sshd_argv(port: int) -> list[str]:
    return ["sh", "-c", f"{_SSHD_START} -D -p {port}"]


def _ssh_keys(directory: Path, port: int) -> dict[str, bytes]:
    """A key pair for this job only: every node's root trusts it, and knows no host keys."""
    key = directory / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tftrain-job", "-f", str(key)], check=True)
    public = (directory / "id_ed25519.pub").read_bytes()
    config = f"Host *\n  Port {port}\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
    return {
        "id_ed25519": key.read_bytes(),
        "id_ed25519.pub": public,
        "authorized_keys": public,
        "config": config.encode(),
    }


def _pack(out, spec: ContainerSpec, ssh_files: dict[str, bytes]) -> None:
    """The run's files as one tar, unpacked at / in every container: read-only mounts with their
    content, read-write ones (outputs, logs, metrics) as empty directories."""

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in info.name.split("/"):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(fileobj=out, mode="w") as archive:
        for mount in spec.mounts:
            name = mount.target.lstrip("/")
            if mount.read_only:
                archive.add(mount.source, arcname=name, filter=owned_by_root)
            else:
                archive.addfile(owned_by_root(_entry(name, tarfile.DIRTYPE, 0o777)))
        if ssh_files:
            archive.addfile(owned_by_root(_entry("root/.ssh", tarfile.DIRTYPE, 0o700)))
            for name, data in ssh_files.items():
                info = owned_by_root(_entry(f"root/.ssh/{name}", tarfile.REGTYPE, 0o600))
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    out.flush()


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, mode
    return info


def _start(placed: list[Placed], plan: LaunchPlan, pump: LogPump, sinks: dict[int, LineSink]) -> None:
    # MPI: the other nodes' sshd first, the launcher last (it waits for them anyway)
    for item in sorted(placed, key=lambda p: p.task is plan.driver and plan.driver is not None):
        read_fd, write_fd = os.pipe()
        if item.task is None:  # an MPI node's sshd: kept, not parsed
            pump.add(f"sshd-{item.host}", read_fd, None, f"sshd@{item.host}")
        else:
            follow(pump, read_fd, plan, item.task, sinks, f"@{item.host}")
        item.container.start(write_fd)


def _supervise(placed: list[Placed], plan: LaunchPlan, control: RunControl, watch: HostWatch) -> Outcome:
    tasks = [item for item in placed if item.task is not None]
    helpers = [item for item in placed if item.task is None]

    def poll():
        lost = watch.lost() or _ended_helper(helpers)
        return [(item.task, _code(item.container.poll(), lost is not None)) for item in tasks]

    def stop(grace: float) -> None:
        stop_all([item.container for item in placed], grace, control.force)

    outcome = supervise(by_policy(poll, stop, plan.success_policy, control), stop, control)
    lost = watch.lost() or _ended_helper(helpers)
    if outcome.status == RunStatus.FAILED and lost is not None:
        stop(0)
        return Outcome(RunStatus.FAILED, outcome.exit_code, f"{lost}; the job was stopped on every host", None)
    return outcome


def _code(code: int | None, lost: bool) -> int | None:
    return HOST_LOST_CODE if code is None and lost else code


def _ended_helper(helpers: list[Placed]) -> str | None:
    for item in helpers:
        try:
            code = item.container.poll()
        except Vanished as gone:
            return f"host {item.host}: {gone}"
        if code is not None:
            return f"host {item.host}: the node's container ended (exit code {code})"
    return None


def _collect(placed: list[Placed], plan: LaunchPlan, logger: Logger, limits: ArchiveLimits) -> None:
    """Bring back what the docker target's read-write mounts would have: outputs and logs of the
    task that keeps outputs, logs (into a subdirectory) and metrics of every other one."""
    outputs = plan.tasks[0].env["TFTRAIN_OUTPUTS_DIR"]
    writable = [mount for mount in plan.container.mounts if not mount.read_only]
    for item in placed:
        for mount in writable:
            shared = mount.target.startswith("/tftrain/")  # metrics: one file per rank, merged
            if item.keeps_outputs or shared:
                destination = Path(mount.source)
            elif mount.target != outputs:
                destination = Path(mount.source) / f"{item.label}@{item.host}"
            else:
                continue
            try:
                fetched = item.container.fetch(mount.target, destination, limits)
                if fetched.skipped:
                    logger.warning(skipped_note(fetched.skipped, f"{mount.target} of {item.label} on {item.host}"))
            except Exception as exc:  # a host gone, or a container that never started
                logger.warning(f"could not copy {mount.target} back from {item.label} on {item.host}: {exc}")
            if destination.is_dir() and destination != Path(mount.source) and not any(destination.iterdir()):
                destination.rmdir()
