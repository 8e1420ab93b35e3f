"""Nothing a training starts outlives its run: daemons, signals to tftrain, tftrain killed.

Each test starts tftrain inside a cgroup of its own (below the test's cgroup), so the run
cgroups tftrain makes next to its own land there, and the test's teardown can end everything
it started without touching anything else on the machine.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from containment import finish, pids_in, run_cgroups, start, wait_dead, watcher_of
from watching import alive, run_status, wait_for

pytestmark = pytest.mark.integration

DAEMON = """\
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: no parent in the run, no TFTRAIN_RUN_ID, our stdout still open
        os.execve("/bin/sh", ["/bin/sh", "-c", "echo $$ > outputs/daemon; exec /bin/sleep 300"], {})
    os._exit(0)
os.wait()
print("ready", flush=True)
time.sleep(1000)
"""


def test_a_daemon_with_an_empty_environment_dies_with_the_time_limit(project, home, test_cgroup):
    path = project(script=DAEMON, manifest="max_run_duration_seconds: 3\ncompute:\n  kill_grace_seconds: 1\n")
    started = time.monotonic()
    process = start(path, test_cgroup)
    out, err = finish(process, timeout=120)
    elapsed = time.monotonic() - started
    assert process.returncode == 11, err
    assert "TimedOut: max_run_duration_seconds (3s) reached" in err
    daemon = pids_in(home / "runs/demo-1/workdir/outputs/daemon")[0]
    assert wait_dead(daemon, 5), "the daemon survived the run"
    assert elapsed < 100, f"tftrain took {elapsed:.0f}s: it waited for the daemon's sleep"
    assert "still writes to its log" not in out  # the daemon's end closed the log pipe
    assert run_cgroups(test_cgroup) == []  # the run's cgroup is removed


STUBBORN = """\
import os, signal, time
signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
open("outputs/pid", "w").write(str(os.getpid()))
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_a_second_sigint_kills_without_waiting_out_the_grace(project, home, test_cgroup):
    path = project(script=STUBBORN, manifest="compute:\n  kill_grace_seconds: 60\n")
    process = start(path, test_cgroup)
    log = home / "runs/demo-1/workdir/logs/0.log"
    wait_for(log, "ready")
    process.send_signal(signal.SIGINT)
    wait_for(log, "ignoring SIGTERM")  # tftrain is waiting out the 60 s grace now
    process.send_signal(signal.SIGINT)
    out, err = finish(process, timeout=30)
    assert process.returncode == 12, err
    assert "second signal: killing the training now" in out
    assert run_status(home, "demo-1") == "Canceled"
    assert wait_dead(pids_in(home / "runs/demo-1/workdir/outputs/pid")[0], 5)


FAMILY = """\
import os, subprocess, time
child = subprocess.Popen(["sleep", "1000"])
escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
open("outputs/pids", "w").write(f"{os.getpid()} {child.pid} {escaped.pid}")
print("ready", flush=True)
time.sleep(1000)
"""


def test_reap_run_ends_what_is_left_when_the_watcher_is_gone_too(project, home, test_cgroup):
    from runner.targets.local.processes import reap_run

    process = start(project(script=FAMILY), test_cgroup)
    wait_for(home / "runs/demo-1/workdir/logs/0.log", "ready")
    os.kill(watcher_of(process.pid), signal.SIGKILL)  # the watcher first: nothing ends the rest now
    process.kill()
    finish(process, timeout=30)
    script, *grandchildren = pids_in(home / "runs/demo-1/workdir/outputs/pids")
    assert wait_dead(script, 10), "the training outlived tftrain (no parent-death signal)"
    assert all(alive(pid) for pid in grandchildren)  # left in the run's cgroup, for reap_run
    assert reap_run("demo-1", home) == 2
    assert not any(alive(pid) for pid in grandchildren)
    assert run_cgroups(test_cgroup) == []
    assert reap_run("demo-1", home) == 0  # nothing left: no error either


def test_sighup_cancels_the_run(project, home, test_cgroup):
    path = project(script=FAMILY, manifest="compute:\n  kill_grace_seconds: 2\n")
    process = start(path, test_cgroup)
    wait_for(home / "runs/demo-1/workdir/logs/0.log", "ready")
    process.send_signal(signal.SIGHUP)
    out, err = finish(process, timeout=60)
    assert process.returncode == 12, err
    assert "SIGHUP: stopping the training" in out
    assert run_status(home, "demo-1") == "Canceled"
    assert not any(alive(pid) for pid in pids_in(home / "runs/demo-1/workdir/outputs/pids"))


ORPHAN = """\
import os, subprocess
escaped = subprocess.Popen(["sleep", "1000"], start_new_session=True)
open("outputs/pid", "w").write(str(escaped.pid))
"""


def test_without_a_cgroup_one_warning_and_the_marker_sweep(project, home, test_cgroup):
    (test_cgroup.path / "cgroup.max.depth").write_text("1")  # tftrain/ may be made, a run cgroup below it not
    process = start(project(script=ORPHAN), test_cgroup)
    out, err = finish(process, timeout=120)
    assert process.returncode == 0, err
    warnings = [line for line in (out + err).splitlines() if "no cgroup for this run" in line]
    assert len(warnings) == 1, out + err
    assert "cannot create a cgroup in" in warnings[0] and "found by its TFTRAIN_RUN_ID only" in warnings[0]
    assert wait_dead(pids_in(home / "runs/demo-1/workdir/outputs/pid")[0], 5)
