"""The fake cluster: a job is a JSON file under TFTRAIN_HOME/fake-cluster/ and an allocation
process (the scheduler's hold on the job, which outlives tftrain the way a cluster job does)
beside the plan's processes. Composed of tftrain's public parts, as any backend is: the
interpreter environment (runner.targets.interpreter), the protocol's defaults (runner.targets.base),
the supervision clock (runner.targets.supervise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from runner.environments import current_interpreter
from runner.history.states import RunStatus
from runner.paths import tftrain_home
from runner.targets.base import Outcome, Target, follow
from runner.targets.interpreter import InterpreterState, interpreter_environment, task_environment
from runner.targets.supervise import by_policy, supervise

JOB_FILE = "fake-job.json"


def jobs_dir(home: Path) -> Path:
    return home / "fake-cluster"


class FakeTarget(Target):
    name = "fake"

    def check(self, loaded, dry_run=False):
        return InterpreterState(current_interpreter())

    def environment(self, loaded, state, paths, logger, dry_run):
        return interpreter_environment(loaded, state, paths, logger, dry_run)

    def finalize(self, plan, loaded, run_id):
        job = {"job": f"fake-{run_id}", "tasks": [{"label": t.label, "argv": t.argv} for t in plan.processes]}
        return replace(plan, files={**plan.files, JOB_FILE: json.dumps(job, indent=2) + "\n"})

    def execute(self, plan, pump, sinks, control, logger):
        run_id = control.marker.rsplit("=", 1)[-1]
        job = jobs_dir(tftrain_home()) / f"{run_id}.json"
        job.parent.mkdir(parents=True, exist_ok=True)
        allocation = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True)
        job.write_text(json.dumps({"allocation": allocation.pid}))
        logger.info(f"fake: submitted job fake-{run_id} (allocation {allocation.pid})")
        started = []
        try:
            for task in plan.processes:
                read, write = os.pipe()
                process = subprocess.Popen(
                    task.argv,
                    cwd=task.cwd,
                    env=task_environment(task.env, self.gpus),
                    stdout=write,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                os.close(write)
                follow(pump, read, plan, task, sinks, "@fake")
                started.append((task, process))

            def poll():
                return [(task, process.poll()) for task, process in started]

            def stop(grace):
                for _, process in started:
                    if process.poll() is None:
                        os.killpg(process.pid, signal.SIGTERM)

            return supervise(by_policy(poll, stop, plan.success_policy, control), stop, control)
        except OSError as exc:
            return Outcome(RunStatus.FAILED, None, f"fake: cannot start the job: {exc}")
        finally:
            allocation.kill()
            allocation.wait()
            job.unlink(missing_ok=True)
            for thread in pump.threads:
                thread.join(10)

    def reap_lost(self, run_id, home):
        job = jobs_dir(home) / f"{run_id}.json"
        if not job.exists():
            return None
        pid = json.loads(job.read_text())["allocation"]
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.unlink()
        return f"cancelled fake job fake-{run_id} (allocation {pid})"
