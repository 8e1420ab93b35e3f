"""What a unit test may not do: start a process, import TensorFlow, or reach past this machine (loopback only).
tests/conftest.py holds every test under tests/unit to it (tests marked integration excepted)."""

from __future__ import annotations

import contextlib
import importlib.abc
import io
import ipaddress
import os
import socket
import subprocess
import sys

import pytest

HEAVY = ("tensorflow", "keras", "horovod")
_holding = False


def holding() -> bool:
    """Whether the running test is held pure (a unit test)."""
    return _holding


def in_process(argv: list[str], cwd=None, env=None, input=None) -> subprocess.CompletedProcess:
    """`tftrain ARGS` run by runner.cli.main in this process, with its own cwd, environment and
    captured output: what a unit test sees of the CLI without starting one."""
    from runner.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(input or "")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv[1:])
            except SystemExit as exit:  # argparse
                code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


class Impure(AssertionError):
    pass


class _NoHeavyImports(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise Impure(f"a unit test imported {name}: move it to tests/integration")
        return None


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise Impure(f"a unit test {what}: move it to tests/integration")

    return refuse


def _loopback_only(original):
    def connect(sock, address, *args, **kwargs):
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and not ipaddress.ip_address(
                socket.gethostbyname(address[0]) if sock.family == socket.AF_INET else address[0]
            ).is_loopback
        ):
            raise Impure(f"a unit test connected to {address[0]}: move it to tests/integration")
        return original(sock, address, *args, **kwargs)

    return connect


@pytest.fixture
def pure(monkeypatch, tmp_path_factory):
    """Applied to every unit test by tests/conftest.py."""
    monkeypatch.setenv(
        "TFTRAIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "unit-cache")
    )  # never the user's cache
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("started a process"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "execv", "execve"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, _refuse("started a process"))
    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, _loopback_only(getattr(socket.socket, name)))
    finder = _NoHeavyImports()
    sys.meta_path.insert(0, finder)
    global _holding
    _holding = True
    yield
    _holding = False
    sys.meta_path.remove(finder)
