"""The user_managed check (runner/environments/user_managed.py check_interpreter) cold against
cached, on this suite's interpreter (which holds TensorFlow): each cold round starts from an empty
cache directory, each cached round finds the entry the check before it kept. Baseline, in the same
process: the bare TensorFlow import the check used to start on every run (import_in).

    .venv/bin/python bench/user_managed.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from runner.environments import checkcache, user_managed


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    python = args.python
    with tempfile.TemporaryDirectory() as tmp:
        bare, cold, cached, key = [], [], [], []
        for round_no in range(args.rounds):
            os.environ["TFTRAIN_CACHE_DIR"] = str(Path(tmp) / f"cache-{round_no}")  # empty: cold
            bare.append(timed(lambda: user_managed.import_in(python)))
            cold.append(timed(lambda: user_managed.check_interpreter(python)))
            cached.append(timed(lambda: user_managed.check_interpreter(python)))
            key.append(timed(lambda: checkcache.interpreter_key(python)))
    b, c, h, k = (statistics.median(times) for times in (bare, cold, cached, key))
    print(f"interpreter: {python}; medians of {args.rounds} rounds")
    print(f"baseline: the bare import check (every run before the cache) {b:.3f}s")
    print(f"cold check (import + key + keep): {c:.3f}s ({c / b:.2f}x the baseline)")
    print(
        f"cached check (key + read): {h:.3f}s ({h / b:.4f}x the baseline, {b / h:.0f}x faster); of which the key's"
        f" process {k:.3f}s"
    )


if __name__ == "__main__":
    main()
