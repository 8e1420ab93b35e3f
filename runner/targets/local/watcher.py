"""A watcher tied to tftrain's life: when tftrain dies, even of SIGKILL, the run's processes die at once.

The tasks tftrain starts die with it (their parent-death signal), but what they started does not:
a child in the task's group, or a grandchild that called setsid, is re-parented and lives on in
the run's cgroup until the next tftrain command finds the run lost (targets/leftovers.py: reconcile). So each run
on the local target has a watcher: a `/bin/sh` started after the tasks (off the script's start
path: ~1 ms of tftrain's time), in a session of its own (a terminal's Ctrl-C or hang-up never
reaches it), blocked reading a pipe whose only write end tftrain holds. The kernel closes that end
when tftrain dies however it dies, the read sees end of file, and the watcher kills the run's
cgroup as a whole (cgroup.kill, Linux 5.14; before that frozen, then each process), removes it,
and exits. A pipe and not a parent-death signal: that signal comes when the *thread* that started
the process ends, and tftrain starts tasks from more than one thread (a sweep's trials).

Where the run has no cgroup, the watcher kills every process whose environment still holds the
run's own outputs directory (`TFTRAIN_OUTPUTS_DIR=…`, unique to one run in one TFTRAIN_HOME, so a
reused pid or another home's run of the same id is never hit); a daemon that emptied its
environment survives that, as docs/local.md says.

At the run's normal end tftrain writes `done` first: the watcher exits without touching anything.
"""

from __future__ import annotations

import os
import subprocess

SHELL = "/bin/sh"
DISMISS_WAIT_SECONDS = 5.0

# $1: the run's cgroup directory ("" without one); $2: NAME=VALUE in the environment of the run's
# processes (the sweep where there is no cgroup). `read` returns at "done" (dismissed) or at end of
# file (tftrain is gone). The cgroup is removed once empty (~5 s at most; else the next command does).
WATCH_SH = r"""
read -r word
[ "$word" = done ] && exit 0
cgroup=$1 marker=$2
if [ -z "$cgroup" ]; then
  [ -n "$marker" ] || exit 0
  for pass in 1 2 3; do
    for proc in /proc/[0-9]*; do
      [ "${proc#/proc/}" = "$$" ] && continue
      grep -qzxF -e "$marker" "$proc/environ" 2>/dev/null && kill -s KILL "${proc#/proc/}" 2>/dev/null
    done
  done
  exit 0
fi
if [ -e "$cgroup/cgroup.kill" ]; then
  echo 1 >"$cgroup/cgroup.kill"
else
  echo 1 >"$cgroup/cgroup.freeze"
  for pid in $(cat "$cgroup/cgroup.procs"); do kill -s KILL "$pid"; done
  echo 0 >"$cgroup/cgroup.freeze"
fi 2>/dev/null
for wait in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
  rmdir "$cgroup" 2>/dev/null && exit 0
  [ -d "$cgroup" ] || exit 0
  sleep 0.25
done
"""


class Watcher:
    """A started watcher: `dismiss` at the run's normal end; tftrain's death sets it off."""

    def __init__(self, process: subprocess.Popen, write_fd: int) -> None:
        self.process, self.write_fd = process, write_fd

    @classmethod
    def start(cls, cgroup: str | None, marker: str) -> tuple[Watcher | None, str]:
        """A watcher for the run's cgroup directory (or, without one, its processes found by
        `marker`, NAME=VALUE); None and why where none can be started."""
        if not os.access(SHELL, os.X_OK):
            return None, f"{SHELL} is missing"
        if "\n" in marker or "\0" in marker:  # grep would read a line of it as a pattern of its own
            marker = ""
        read_fd, write_fd = os.pipe()  # neither end is inherited: only the watcher's stdin is
        try:
            process = subprocess.Popen(
                [SHELL, "-c", WATCH_SH, "tftrain-watch", cgroup or "", marker],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            os.close(write_fd)
            return None, f"{SHELL}: {exc.strerror}"
        finally:
            os.close(read_fd)
        return cls(process, write_fd), ""

    def dismiss(self) -> None:
        """The run ended here: the watcher exits without killing (the cgroup may be removed next)."""
        if self.write_fd < 0:
            return
        try:
            os.write(self.write_fd, b"done\n")
        except OSError:
            pass  # it is gone already (killed by hand): nothing to tell
        finally:
            os.close(self.write_fd)
            self.write_fd = -1
        try:
            self.process.wait(timeout=DISMISS_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()  # a watcher that cannot read its pipe is of no use
            self.process.wait()
