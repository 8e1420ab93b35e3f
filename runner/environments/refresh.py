"""Rebuild the curated TensorFlow sets (scripts/refresh-frameworks calls this).

For each release: a fresh virtualenv with this Python, `pip install tensorflow-cpu==X.* tensorboard`
(and `tf-keras==X.*` without its dependencies where Keras 3 ships, for Horovod's Keras API), the
smoke test, and only if it passes, runner/frameworks/constraints/tensorflow-X.txt from `pip freeze`
filtered to the set's packages. A release that fails keeps its old file, if any.

    python -m runner.environments.refresh [RELEASE ...] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from runner.frameworks.curated import SET_PACKAGES, normalise, parse_set, set_path
from runner.frameworks.releases import FRAMEWORKS, uses_keras3

SMOKE = Path(__file__).with_name("smoke.py")


class RefreshFailed(Exception):
    pass


def refresh(release: str, workdir: Path) -> Path:
    venv = workdir / f"venv-{release}"
    shutil.rmtree(venv, ignore_errors=True)
    try:
        _run([sys.executable, "-m", "venv", str(venv)], "creating the virtualenv")
        python = str(venv / "bin" / "python")
        pip = [python, "-m", "pip", "install", "--quiet", "--progress-bar", "off"]
        installs = [f"tensorflow-cpu=={release}.* tensorboard"]
        _run([*pip, f"tensorflow-cpu=={release}.*", "tensorboard"], f"pip install tensorflow-cpu=={release}.*")
        checks = [("Smoke test", {}, _smoke(python, workdir / f"smoke-{release}", {}))]
        if uses_keras3(release):
            # tf-keras requires the full `tensorflow` (the CUDA build): --no-deps keeps tensorflow-cpu.
            _run([*pip, "--no-deps", f"tf-keras=={release}.*"], f"pip install tf-keras=={release}.*")
            installs.append(f"--no-deps tf-keras=={release}.*")
            legacy = {"TF_USE_LEGACY_KERAS": "1"}
            checks.append(
                (
                    "Smoke test with TF_USE_LEGACY_KERAS=1 (tf-keras)",
                    legacy,
                    _smoke(python, workdir / f"smoke-{release}-legacy", legacy),
                )
            )
        frozen = _run([python, "-m", "pip", "freeze", "--all"], "pip freeze")
    finally:
        shutil.rmtree(venv, ignore_errors=True)
    text = render(release, frozen, installs, checks)
    parse_set(release, set_path(release), text)  # what the product reads must parse
    set_path(release).write_text(text)
    return set_path(release)


def render(release: str, frozen: str, installs: list[str], checks: list) -> str:
    pins = {}
    for line in frozen.splitlines():
        name, sep, version = line.partition("==")
        if sep and normalise(name) in SET_PACKAGES:
            pins[normalise(name)] = version.strip()
    tensorflow = pins.get("tensorflow-cpu")
    if not tensorflow or not tensorflow.startswith(release + "."):
        raise RefreshFailed(f"{release}: pip freeze shows tensorflow-cpu {tensorflow}")
    pins.setdefault("tensorflow", tensorflow)  # GPU builds install tensorflow[and-cuda], same version
    today = datetime.date.today().isoformat()
    header = [
        f"# tftrain's tested set for TensorFlow {release}: pip constraints (pip install -c THIS_FILE ...).",
        (
            f"# Generated {today} by scripts/refresh-frameworks on Python {platform.python_version()}, "
            f"{platform.system().lower()} {platform.machine()}:"
        ),
        *(f"#   pip install {line}" for line in installs),
        *(
            f"# {what} (runner/environments/smoke.py): passed {json.dumps(result, sort_keys=True)}"
            for what, _, result in checks
        ),
        "# Do not edit by hand: run scripts/refresh-frameworks " + release,
    ]
    return "\n".join(header + [f"{name}=={version}" for name, version in sorted(pins.items())]) + "\n"


def _smoke(python: str, workdir: Path, env: dict[str, str]) -> dict:
    shutil.rmtree(workdir, ignore_errors=True)
    output = _run([python, str(SMOKE), str(workdir)], "the smoke test", env)
    shutil.rmtree(workdir, ignore_errors=True)
    lines = [line for line in output.splitlines() if line.startswith("smoke: ")]
    if not lines:
        raise RefreshFailed(f"the smoke test printed no result: {output[-500:]}")
    return json.loads(lines[-1][len("smoke: ") :])


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> str:
    print(f"$ {' '.join(argv)}", file=sys.stderr, flush=True)
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RefreshFailed(f"{what} failed (exit {done.returncode}):\n" + "\n".join(tail))
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/refresh-frameworks", description=__doc__.split("\n\n")[0])
    parser.add_argument("releases", nargs="*", help=f"releases to refresh (default: all, {', '.join(FRAMEWORKS)})")
    parser.add_argument("--workdir", type=Path, help="where the virtualenvs go (default: a temporary folder)")
    args = parser.parse_args(argv)
    unknown = [release for release in args.releases if release not in FRAMEWORKS]
    if unknown:
        parser.error(f"not in the framework table: {', '.join(unknown)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tftrain-refresh-"))
    failed = []
    for release in args.releases or list(FRAMEWORKS):
        try:
            print(f"refresh: {release}: wrote {refresh(release, workdir)}", flush=True)
        except RefreshFailed as exc:
            failed.append(release)
            print(f"refresh: {release}: FAILED, its set is left as it was: {exc}", flush=True)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
