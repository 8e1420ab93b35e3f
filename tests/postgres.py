"""A throwaway PostgreSQL server for the tests: Debian's binaries (scripts/system-deps installs
them), a fresh cluster in a temporary folder, listening on a free port of 127.0.0.1 only, with
password authentication (so that a wrong password is refused for real). Root cannot run postgres,
so as root the server runs as the `postgres` user."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

USER = "tftrain"
DATABASE = "sweeps"
START_SECONDS = 10  # a server that is not up by then is broken, not slow (it takes ~1 s here)


def server_binaries() -> Path | None:
    """The folder holding initdb and postgres: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return versions[-1].parent if versions else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """initdb + postgres in a temporary folder; a context manager that always stops the server
    and removes the folder."""

    def __init__(self) -> None:
        self.bin = server_binaries()
        self.password = secrets.token_hex(8)
        self.port = 0
        self.root: Path | None = None
        self.process: subprocess.Popen | None = None
        # postgres refuses to run as root; as anyone else it runs as that user
        self.as_user = "postgres" if os.geteuid() == 0 else None

    def url(self, password: str | None = None, database: str = DATABASE, port: int | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql://{USER}:{secret}@127.0.0.1:{port or self.port}/{database}"

    def start(self) -> PostgresServer:
        if self.bin is None:
            raise RuntimeError(
                "PostgreSQL server binaries (initdb, postgres) not found on PATH or in /usr/lib/postgresql: "
                "run scripts/system-deps (apt-get install postgresql)"
            )
        self.root = Path(tempfile.mkdtemp(prefix="tftrain-pg-"))
        if self.as_user:
            entry = pwd.getpwnam(self.as_user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        (self.root / "pwfile").write_text(self.password + "\n")
        self._run(
            str(self.bin / "initdb"),
            "--no-sync",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            f"--username={USER}",
            f"--pwfile={self.root / 'pwfile'}",
            "--encoding=UTF8",
            "--locale=C",
            f"--pgdata={self.root / 'data'}",
        )
        for _ in range(3):  # another process may take the free port before postgres binds it
            self._launch()
            if self._wait_ready():
                break
        else:
            self._fail()
        self.create_database(DATABASE)
        return self

    def create_database(self, name: str, owner: str | None = None) -> None:
        self._sql(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))

    def create_user(self, name: str, password: str) -> None:
        """A login role with `password` (any characters: a literal with its quotes doubled)."""
        literal = password.replace("'", "''")
        self._sql(f"CREATE ROLE {name} LOGIN PASSWORD '{literal}'")

    def halt(self) -> None:
        """Stop the server as an outage would (fast shutdown), keeping its data for `restart`."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=15)

    def restart(self) -> None:
        """The server back on the same port, with the data it had."""
        self._launch(self.port)
        if not self._wait_ready():
            self._fail()

    def _launch(self, port: int | None = None) -> None:
        self.port = port or free_port()
        with open(self.root / "server.log", "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.root / "data"),
                    "-p",
                    str(self.port),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    f"unix_socket_directories={self.root}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                user=self.as_user,
                start_new_session=True,
            )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # SIGINT is postgres' "fast" shutdown: backends end, the postmaster exits last
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self, *argv: str) -> str:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, user=self.as_user, cwd=self.root, stdin=subprocess.DEVNULL
        )
        if done.returncode:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done.stdout

    def _sql(self, statement: str) -> str:
        # psql over the Unix socket (trusted): the test server's own setup, apart from the code under test
        return self._run(
            str(self.bin / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            USER,
            "-d",
            "postgres",
            "-c",
            statement,
        )

    def _wait_ready(self) -> bool:
        """True once the server answers; False if it exited (a port taken under it); raises if it hangs."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port), "-t", "1"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
            if ready.returncode == 0:
                return True
            time.sleep(0.05)
        self._fail()

    def _fail(self):
        log = (self.root / "server.log").read_text(errors="replace")[-2000:]
        state = f"exited with {self.process.returncode}" if self.process.poll() is not None else "not ready"
        raise RuntimeError(f"PostgreSQL on 127.0.0.1:{self.port} {state} after {START_SECONDS} s; its log:\n{log}")


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the session (see PostgresServer); fails, never skips, without one."""
    server = PostgresServer()
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        server.stop()
        pytest.fail(f"no PostgreSQL server for the tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server) -> str:
    """postgresql://tftrain:PASSWORD@127.0.0.1:PORT/sweeps on the session's server."""
    return postgres_server.url()
