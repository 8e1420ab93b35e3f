"""Watching the hosts of a running job: a host that stops answering fails the job in seconds,
instead of leaving it hung on a TCP connection nobody will ever answer."""

from __future__ import annotations

import socket
import threading

from runner.targets.pool.inventory import Host

PROBE_SECONDS = 5.0
CONNECT_TIMEOUT = 3.0
MISSES = 2  # consecutive failed probes before a host counts as lost: ≤ ~16 s


class HostWatch:
    def __init__(self, hosts: list[Host]) -> None:
        self.hosts = hosts
        self.misses = {host.name: 0 for host in hosts}
        self.problem: str | None = None
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="pool-watch", daemon=True)

    def __enter__(self) -> HostWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self.thread.join()

    def lost(self) -> str | None:
        return self.problem

    def _watch(self) -> None:
        while not self.stopped.wait(PROBE_SECONDS):
            for host in self.hosts:
                error = reachable(host)
                self.misses[host.name] = self.misses[host.name] + 1 if error else 0
                if self.misses[host.name] >= MISSES and self.problem is None:
                    self.problem = (
                        f"host {host.name} ({host.address}) stopped answering: ssh port {host.ssh_port}: {error}"
                    )


def reachable(host: Host) -> str | None:
    """None when the host's sshd accepts a TCP connection, else why not."""
    try:
        with socket.create_connection((host.address, host.ssh_port), timeout=CONNECT_TIMEOUT):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
