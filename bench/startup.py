"""How fast tftrain starts: `tftrain --version` against `python -c pass`, and the time from
launching `tftrain run` until the script's first line reaches stdout against `python train.py`
(and, with --mlflow, against `mlflow run --env-manager local` on the same script); also the first
line when tftrain has not read the manifest before (an empty cache: PyYAML parses it). Medians of
--rounds repetitions, alternating, printed as ratios from this one run: the machine's load
cancels out. Goals: --version ≤ 0.10 s, first line ≤ 0.25 s after `python train.py`'s.

Bytecode is written and used, as in an installed tftrain (pip compiles it at install), under a
temporary PYTHONPYCACHEPREFIX: the tree measured is left as it was found.
PYTHONDONTWRITEBYTECODE is dropped from the timed commands' environment, else every start would
time the compiler (~70 ms of `tftrain run`'s). The load average before and after is printed: the
conditions of the figures.

    .venv/bin/python bench/startup.py [--rounds N] [--mlflow] [--against DIR]

--against DIR also times `tftrain run` with another checkout's runner/ (a `git worktree` of the
commit before a change), in the same rounds: before and after under the same load. Each case's
minimum is printed beside its median: on a busy machine, the quiet moments.

--mlflow builds its own virtualenv (<tmp>/.bench-venv, kept between runs) with pip; mlflow is
never installed into tftrain's environment.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TFTRAIN = str(Path(sys.executable).parent / "tftrain")
FIRST_LINE = "tftrain-bench-first-line"
LIMIT_SECONDS = 60  # one launch; the bench never hangs on a stuck one


def elapsed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from launch until the process has exited.

    A blocking wait, with a timer for the hang limit: `wait(timeout=…)` polls with sleeps that double
    from 1 ms (1, 3, 7, 15, 31, 63 ms…), so a 32 ms command read as 63 ms."""
    started = time.perf_counter()
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        watchdog = threading.Timer(LIMIT_SECONDS, proc.kill)
        watchdog.start()
        try:
            code = proc.wait()
        finally:
            watchdog.cancel()
    took = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {code}")
    return took


def first_line(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from launch until FIRST_LINE appears on stdout; the rest of the run is waited for."""
    started = time.perf_counter()
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        seen = None
        for line in proc.stdout:
            if seen is None and FIRST_LINE.encode() in line:
                seen = time.perf_counter() - started
        proc.wait(timeout=LIMIT_SECONDS)
    if seen is None:
        raise SystemExit(f"{' '.join(argv)}: the script's line never appeared (exit {proc.returncode})")
    return seen


def project(root: Path) -> Path:
    folder = root / "demo"
    (folder / "src").mkdir(parents=True, exist_ok=True)
    (folder / "src" / "train.py").write_text(f"print({FIRST_LINE!r}, flush=True)\n")
    (folder / "tftrain.yml").write_text("name: demo\nsource_directory: src\nentry_script: train.py\n")
    (folder / "MLproject").write_text("name: demo\nentry_points:\n  main:\n    command: python src/train.py\n")
    # a checkout with a commit, as in CI: tftrain records the lineage (after the script started)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "bench"]):
        subprocess.run(git + command, cwd=folder, check=True, stdout=subprocess.DEVNULL)
    return folder


def mlflow_venv(root: Path) -> Path | None:
    """A virtualenv of its own with mlflow, built once; None (with a note) where pip cannot."""
    venv = root / ".bench-venv"
    mlflow = venv / "bin" / "mlflow"
    if mlflow.exists():
        return mlflow
    print(f"building {venv} with mlflow (once)…", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "mlflow"], check=True, timeout=900)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"mlflow comparison skipped: {exc}", file=sys.stderr)
        return None
    return mlflow


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--mlflow", action="store_true", help="also time `mlflow run --env-manager local`")
    parser.add_argument("--keep", type=Path, help="a folder kept between runs (the mlflow virtualenv lives there)")
    parser.add_argument("--against", type=Path, help="another checkout whose runner/ is timed too (tftrain run)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tftrain-startup-") as tmp:
        root = args.keep or Path(tmp)
        folder = project(Path(tmp))
        env = {
            **os.environ,
            "TFTRAIN_HOME": str(Path(tmp) / "home"),
            "TFTRAIN_CACHE_DIR": str(Path(tmp) / "cache"),
            "PYTHONPATH": str(REPO),
            "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache"),
        }  # bytecode of the measured tree kept outside it
        fresh = itertools.count()

        def new_cache() -> dict[str, str]:  # the manifest is parsed, as the first time tftrain reads it
            return {**env, "TFTRAIN_CACHE_DIR": str(Path(tmp) / f"cache-{next(fresh)}")}

        env.pop("GITHUB_ACTIONS", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        load_before = os.getloadavg()
        mlflow = mlflow_venv(root) if args.mlflow else None
        mlflow_env = {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{Path(tmp) / 'mlflow.db'}"}

        cases = {
            "python -c pass": lambda: elapsed([sys.executable, "-c", "pass"], folder, env),
            "tftrain --version": lambda: elapsed([TFTRAIN, "--version"], folder, env),
            "python train.py: first line": lambda: first_line([sys.executable, "src/train.py"], folder, env),
            "tftrain run: first line": lambda: first_line([TFTRAIN, "run"], folder, env),
            "  manifest not read before": lambda: first_line([TFTRAIN, "run"], folder, new_cache()),
        }
        if args.against is not None:  # its own home: another version's history is not mixed with this one's
            other = {**env, "PYTHONPATH": str(args.against.resolve()), "TFTRAIN_HOME": str(Path(tmp) / "home-against")}
            cases["tftrain run (--against)"] = lambda: first_line([TFTRAIN, "run"], folder, other)
            cases["tftrain run (--against)"]()
        if mlflow is not None:
            cases["mlflow run: first line"] = lambda: first_line(
                [str(mlflow), "run", ".", "--env-manager", "local"], folder, mlflow_env
            )
        samples: dict[str, list[float]] = {name: [] for name in cases}
        cases["tftrain run: first line"]()  # the store, its schema and the manifest's parse exist before timing starts
        for _ in range(args.rounds):  # alternating: a burst of load hits every case alike
            for name, case in cases.items():
                samples[name].append(case())

    medians = {name: median(values) for name, values in samples.items()}
    print(
        f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_before)} before,"
        f" {' '.join(f'{x:.2f}' for x in os.getloadavg())} after; {os.cpu_count()} CPUs"
    )
    for name, value in medians.items():
        print(f"{name:32} {value * 1000:8.1f} ms  (median of {args.rounds}; least {min(samples[name]) * 1000:.1f})")
    base, script = medians["python -c pass"], medians["python train.py: first line"]
    print(f"tftrain --version / python -c pass:        {medians['tftrain --version'] / base:5.1f}x")
    print(
        f"tftrain run / python train.py, first line: {medians['tftrain run: first line'] / script:5.1f}x"
        f"  ({(medians['tftrain run: first line'] - script) * 1000:.0f} ms after; goal ≤ 250)"
    )
    print(f"  the same, manifest not read before:      {medians['  manifest not read before'] / script:5.1f}x")
    if "tftrain run (--against)" in medians:
        against = medians["tftrain run (--against)"]
        print(
            f"  --against {args.against}: {against / script:5.1f}x ({(against - script) * 1000:.0f} ms after); least:"
            f" {(min(samples['tftrain run: first line']) - min(samples['python train.py: first line'])) * 1000:.0f} ms"
            " after here,"
            f" {(min(samples['tftrain run (--against)']) - min(samples['python train.py: first line'])) * 1000:.0f}"
            " there"
        )
    if "mlflow run: first line" in medians:
        print(
            "mlflow run / tftrain run, first line:     "
            f" {medians['mlflow run: first line'] / medians['tftrain run: first line']:5.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
