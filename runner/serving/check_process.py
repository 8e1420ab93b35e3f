"""Start `python -m runner.serving.model_check` in a process of its own on this machine: its output
into a log, a time limit, its whole process group gone afterwards. A warm probe is started during
the training once a CPU sits idle (runner.serving.prestart), at the lowest priority, and imports
TensorFlow while the training runs; the check's arguments reach it on stdin once the training completed.

Its TMPDIR is a folder beside its log, removed once it has ended: TensorFlow's autograph writes a
source file there for each function it converts (the model's signatures) and removes it only at
interpreter exit, which the probe skips (os._exit) or never reaches when it is killed — two files
left in the machine's /tmp by every gate otherwise."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

PROBE_MODULE = "runner.serving.model_check"


def scratch(log: Path) -> Path:
    """The probe's TMPDIR (the module's docstring says why)."""
    return log.with_name(f".{log.name}.tmp")


def _start(
    python: str, args: list[str], pythonpath: Path | None, log: Path, stdin, nice: bool = False
) -> subprocess.Popen:
    scratch(log).mkdir(exist_ok=True)
    # the gate checks on the CPU: a GPU the training used may still be held, and is not needed for one sample
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "-1",
        "TMPDIR": str(scratch(log)),
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    prefix = ["nice", "-n", "19"] if nice and shutil.which("nice") else []
    with log.open("ab") as out:
        return subprocess.Popen(
            [*prefix, python, "-m", PROBE_MODULE, *args],
            stdin=stdin,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _finish(process: subprocess.Popen, timeout: float, log: Path) -> int | None:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        stop(process)
        shutil.rmtree(scratch(log), ignore_errors=True)


def stop(process: subprocess.Popen) -> None:
    """The probe and whatever it started, gone."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    if process.stdin is not None:
        try:
            process.stdin.close()
        except OSError:
            pass


def run_probe(python: str, args: list[str], pythonpath: Path | None, log: Path, timeout: float) -> int | None:
    """The probe's exit status; None when it ran past `timeout` (it is killed)."""
    return _finish(_start(python, args, pythonpath, log, subprocess.DEVNULL), timeout, log)


class WarmProbe:
    """A probe that imports TensorFlow while the training runs (nice 19: it yields the CPU)."""

    def __init__(self, python: str, pythonpath: Path | None, log: Path) -> None:
        self.python, self.pythonpath, self.log = python, pythonpath, log
        self.process = _start(python, ["warm"], pythonpath, log, subprocess.PIPE, nice=True)

    def run(self, args: list[str], timeout: float) -> int | None:
        """Hand it the check's arguments; its exit status (None past `timeout`)."""
        try:
            self.process.stdin.write((json.dumps(args) + "\n").encode())
            self.process.stdin.close()
        except (BrokenPipeError, OSError):  # it died while warming: the exit status tells
            pass
        return _finish(self.process, timeout, self.log)

    def close(self) -> None:
        if self.process.poll() is None or self.process.returncode is None:
            stop(self.process)
        shutil.rmtree(scratch(self.log), ignore_errors=True)


class Warming:
    """The gate's probe for a run on this machine: started ahead during the training, no sooner than
    `after` seconds into it and only once `watch` (runner.serving.prestart) finds a CPU idle (None:
    never ahead); else cold when the gate asks, after the script ended. When and why it started is
    the first line of the gate's log. Whatever is still running at exit is stopped."""

    def __init__(
        self, python: str, pythonpath: Path | None, warm_log: Path, after: float | None, sample=None, why_not: str = ""
    ) -> None:
        """`sample`: what reads the machine (prestart.Machine().read_times by default); `why_not`:
        what the log says when `after` is None."""
        self.python, self.pythonpath, self.warm_log, self.after = python, pythonpath, warm_log, after
        self.sample, self.why_not = sample, why_not
        self._lock = threading.Lock()
        self._warm: WarmProbe | None = None
        self._ended = threading.Event()  # the training ended (the gate asks) or the run is over
        self._watcher: threading.Thread | None = None
        self._began = time.monotonic()
        self.note = ""  # when and why the probe started

    def __enter__(self) -> Warming:
        self._began = time.monotonic()
        if self.after is not None:
            self._watcher = threading.Thread(target=self._watch, name="gate-prestart", daemon=True)
            self._watcher.start()
        return self

    def _watch(self) -> None:
        from runner.serving.prestart import Decision, Machine, watch

        if self._ended.wait(self.after):
            self.note = f"the training ended within {self.after:.0f} s"
            return
        try:
            sample = self.sample or Machine().read_times
            decision = watch(sample, lambda seconds: not self._ended.wait(seconds))
        except Exception as exc:  # a machine that cannot be read: the probe starts after the script
            decision = Decision(False, f"the machine could not be read ({type(exc).__name__}: {exc})")
        with self._lock:
            if not decision.start or self._ended.is_set():
                self.note = decision.why
                return
            self.note = (
                f"started {time.monotonic() - self._began:.1f} s into the training, at the lowest priority:"
                f" {decision.why}"
            )
            try:
                self.warm_log.write_text(f"gate: its process {self.note}\n")
                self._warm = WarmProbe(self.python, self.pythonpath, self.warm_log)
            except OSError as exc:  # it starts after the script, saying why not before
                self.note = f"it could not start during the training ({exc.strerror or exc})"

    def _take(self) -> WarmProbe | None:
        self._ended.set()
        if self._watcher is not None:
            self._watcher.join()
        with self._lock:
            warm, self._warm = self._warm, None
            return warm

    def run(self, args: list[str], log: Path, timeout: float) -> int | None:
        warm = self._take()
        if warm is None or warm.process.poll() is not None:  # never started, or it died warming: a cold one
            if warm is not None:
                warm.close()
                self.note = "its process ahead died while importing TensorFlow"
            with log.open("a") as out:
                out.write(f"gate: its process started after the script ended: {self.note or self.why_not}\n")
            return run_probe(self.python, args, self.pythonpath, log, timeout)
        try:
            return warm.run(args, timeout)
        finally:
            _append(self.warm_log, log)

    def __exit__(self, *exc) -> None:
        warm = self._take()
        if warm is not None:
            warm.close()
        self.warm_log.unlink(missing_ok=True)


def _append(source: Path, target: Path) -> None:
    """The warm probe's output joins the check's log."""
    try:
        with source.open("rb") as reader, target.open("ab") as writer:
            shutil.copyfileobj(reader, writer)
        source.unlink()
    except OSError:
        pass
