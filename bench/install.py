"""The action's install step, timed: the old way (a fresh venv and `pip install` of the action on
every job) against scripts/install-action cold (empty tool cache) and warm (the next job), in one
run on one machine. pip's own cache is left as it is (warm after the first install).

    python bench/install.py [--extras s3]      # TFTRAIN_NO_UV=1: install-action with pip only
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return time.monotonic() - started, result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="", help="the action's extras input, e.g. s3")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="tftrain-bench-install-") as scratch:
        scratch = Path(scratch)
        old_venv = scratch / "old-venv"
        spec = f"{REPO}[{args.extras}]" if args.extras else str(REPO)
        started = time.monotonic()
        subprocess.run([args.python, "-m", "venv", str(old_venv)], check=True)
        subprocess.run(
            [str(old_venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", spec],
            env=env,
            check=True,
            capture_output=True,
        )
        old = time.monotonic() - started
        print(f"old way (venv + pip install, every job): {old:6.1f} s  {size_mb(old_venv):5.0f} MB")

        (scratch / "temp").mkdir()
        env.update(
            GITHUB_ACTION_PATH=str(REPO),
            INPUT_PYTHON=args.python,
            INPUT_EXTRAS=args.extras,
            RUNNER_TOOL_CACHE=str(scratch / "tool-cache"),
            RUNNER_TEMP=str(scratch / "temp"),
        )
        command = [str(REPO / "scripts" / "install-action")]
        cold, line = timed(command, env)
        venv = (scratch / "temp" / "tftrain-venv").resolve()
        print(f"install-action cold (empty tool cache):   {cold:6.1f} s  {size_mb(venv):5.0f} MB  {line}")
        warm, line = timed(command, env)
        print(f"install-action warm (the next job):       {warm:6.1f} s  {'':8}  {line}")
        print(f"cold/old {cold / old:.2f}, warm/old {warm / old:.3f} ({old / warm:.0f}x faster)")


if __name__ == "__main__":
    main()
