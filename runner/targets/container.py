"""A training container, used as a context manager: created, started, streamed, always removed."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from itertools import accumulate
from pathlib import Path

from runner.errors import DockerError, Vanished
from runner.history.archive import Extracted, extract_into
from runner.plan.model import ContainerSpec
from runner.settings import ArchiveLimits
from runner.targets.base import CANNOT_START_SH

LABEL_RUN = "tftrain.run-id"
CATCH_UP_LINES = 1000  # of the log's tail, once the follow has ended
CATCH_UP_BYTES = 1 << 20
CATCH_UP_SECONDS = 10
# Docker copies a container's stdout and stderr through two pipes and logs each line as its copier
# reads it: under load a line printed before a traceback was logged inside it, and the run's error
# named that line. One pipe, as on the local target, keeps the order the process wrote in.
ONE_STREAM = ("/bin/sh", "-c", f'exec 2>&1; {CANNOT_START_SH}; exec "$@"', "tftrain-task")


class Container:
    def __init__(
        self,
        client,
        spec: ContainerSpec,
        argv: Sequence[str],
        env: Mapping[str, str],
        workdir: str,
        name: str,
        labels: Mapping[str, str],
        network_mode: str | None = None,
        gpu_ids: Sequence[int | str] = (),
    ) -> None:
        self.client = client
        self.spec = spec
        self.argv = list(argv)
        self.env = dict(env)
        self.workdir = workdir
        self.name = name
        self.labels = dict(labels)
        self.network_mode = network_mode or spec.network_mode
        self.gpu_ids = [str(gpu) for gpu in gpu_ids]
        self.container = None
        self.streamer: threading.Thread | None = None

    def __enter__(self) -> Container:
        from docker.types import DeviceRequest, Mount

        mounts = [Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in self.spec.mounts]
        kwargs = {}
        if self.gpu_ids:
            kwargs["device_requests"] = [DeviceRequest(device_ids=self.gpu_ids, capabilities=[["gpu"]])]
        elif self.spec.gpus:
            kwargs["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if self.spec.memory:
            kwargs["mem_limit"] = self.spec.memory
            kwargs["memswap_limit"] = self.spec.memory  # no swap: an OOM is an OOM
        if self.spec.shm_size:
            kwargs["shm_size"] = self.spec.shm_size
        try:
            self.container = self.client.containers.create(
                self.spec.image,
                [*ONE_STREAM, *self.argv] if self.spec.one_stream else self.argv,
                name=self.name,
                environment=self.env,
                working_dir=self.workdir,
                user=self.spec.user or None,
                mounts=mounts,
                network_mode=self.network_mode,
                labels=self.labels,
                init=True,  # reaps and forwards signals: `docker stop` reaches the training process
                detach=True,
                **kwargs,
            )
        except Exception as exc:  # docker.errors.APIError, ImageNotFound
            raise DockerError(f"cannot create the container from {self.spec.image}: {_explain(exc)}") from None
        return self

    def start(self, fd: int) -> None:
        """Start, and copy the container's output (stdout and stderr) into `fd` until it ends."""
        try:
            self.container.start()
        except Exception as exc:
            os.close(fd)
            raise DockerError(f"cannot start the container: {_explain(exc)}") from None
        self.streamer = threading.Thread(target=self._stream, args=(fd,), name=f"docker-logs-{self.name}", daemon=True)
        self.streamer.start()

    def _stream(self, fd: int) -> None:
        """The followed log, then what it missed: a follow can end when the container exits before
        the daemon has logged its last lines (seen under load: a traceback lost); the log's tail,
        asked for once it has ended, brings them."""
        seen = bytearray()  # the end of what was copied, to line the tail up with
        try:
            for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                os.write(fd, chunk)
                seen += chunk
                if len(seen) > 2 * CATCH_UP_BYTES:
                    del seen[:-CATCH_UP_BYTES]
            self.container.wait(timeout=CATCH_UP_SECONDS)
            missed = missing_tail(bytes(seen), self.container.logs(stdout=True, stderr=True, tail=CATCH_UP_LINES))
            if missed:
                os.write(fd, missed)
        except Exception:  # the container went away under us; what arrived is in the log
            pass
        finally:
            os.close(fd)

    def put(self, archive) -> None:
        """Unpack a tar archive (a file object, paths relative to /) into the created container."""
        try:
            archive.seek(0)
            self.container.put_archive("/", archive)
        except Exception as exc:
            raise DockerError(f"cannot copy the run's files into {self.name}: {_explain(exc)}") from None

    def fetch(self, path: str, destination: Path, limits: ArchiveLimits = ArchiveLimits()) -> Extracted:
        """Copy `path` (a directory) out of the container into `destination`, by the model
        archives' rules (runner.history.archive) in their lenient form: regular files and directories are
        copied; links, devices, FIFOs and unsafe names are skipped and listed in the result, so
        that one odd entry does not lose a run's outputs. The caps still hold (RegistryError)."""
        with tempfile.TemporaryFile() as spool:
            chunks, _ = self.container.get_archive(path)
            for chunk in chunks:
                spool.write(chunk)
            spool.seek(0)
            # the archive holds `path`'s last component and what is below it: that name is dropped
            return extract_into(spool, destination, f"{path} of {self.name}", strip=1, limits=limits)

    def poll(self) -> int | None:
        """The exit code once the container has ended, else None. While its log stream is open
        the container runs: the daemon is asked only once the stream has ended. Vanished when the
        daemon no longer knows the container."""
        if self.streamer is not None and self.streamer.is_alive():
            return None
        state = self.state()
        if state.get("Running", True) and state.get("Status") not in ("exited", "dead"):
            return None
        return int(state.get("ExitCode", -1))

    def stop(self, grace: float) -> None:
        try:
            self.container.stop(timeout=max(0, int(grace)))
        except Exception:
            pass

    def kill(self) -> None:
        try:
            self.container.kill()
        except Exception:
            pass  # gone already, or its daemon with it

    def state(self) -> dict:
        """The daemon's State of the container; {} when the daemon did not answer this time (a
        hiccup: asked again at the next poll). Vanished when it answers that the container is gone."""
        import docker

        try:
            self.container.reload()
        except docker.errors.NotFound:
            raise Vanished(f"container {self.name} vanished (removed while the run was in progress)") from None
        except Exception:
            return {}
        return self.container.attrs.get("State", {})

    def ended(self) -> bool:
        try:
            return self.poll() is not None
        except Vanished:
            return True

    def __exit__(self, *exc) -> None:
        if self.container is None:
            return
        try:
            self.container.remove(force=True)
        except Exception:
            pass
        if self.streamer is not None:
            self.streamer.join(timeout=10)


def stop_all(containers: list[Container], grace: float, force: threading.Event | None = None) -> None:
    """Stop them all at once: each gets the whole grace period, not a share of it. A daemon that
    does not answer (a host gone) holds nobody up for long. `force` set (a second signal to
    tftrain) kills them at once, also in the middle of the grace period."""
    running = [container for container in containers if not container.ended()]
    threads = [threading.Thread(target=container.stop, args=(grace,)) for container in running]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + grace + 30
    killed = False
    while any(thread.is_alive() for thread in threads) and time.monotonic() < deadline:
        if force is not None and force.is_set() and not killed:
            killed = True
            for container in running:
                container.kill()
        for thread in threads:
            thread.join(timeout=0.05)


def _explain(exc: Exception) -> str:
    return getattr(exc, "explanation", None) or str(exc)


def missing_tail(seen: bytes, tail: bytes) -> bytes:
    """What of `tail` (the log's last lines) comes after `seen` (the end of what was copied): the
    part after the longest start of `tail`, at a line's end, that `seen` ends with. All of `tail`
    when none lines up (more than its lines were missed: a gap, the end kept)."""
    if not tail or seen.endswith(tail):
        return b""
    ends = list(accumulate(len(line) for line in tail.split(b"\n")[:-1]))  # where each line's "\n" is
    ends = [end + count for count, end in enumerate(ends, 1) if end + count < len(tail)]  # the ends inside tail
    copied, lines = memoryview(seen), memoryview(tail)  # compared in place: a tail may be a megabyte
    for end in reversed(ends):
        if end <= len(seen) and copied[len(seen) - end :] == lines[:end]:
            return tail[end:]
    return tail


def remove_run_containers(run_id: str) -> int:
    """Force-remove a lost run's containers (SIGKILL: a lost run has no grace to give); how many. 0
    when no daemon answers (docker not here, or another machine's)."""
    from runner.environments import docker_client

    try:
        client = docker_client()
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})
    except Exception:  # DockerError (no daemon), ImportError (no docker SDK), the daemon's errors
        return 0
    removed = 0
    for container in containers:
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # gone meanwhile
            pass
    return removed
