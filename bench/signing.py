"""What signing and provenance add to registering a model: the example model (examples/mnist-keras:
digits.keras, 64 → hidden → 10, compiled with Adam, as its train.py saves it) registered plainly,
with provenance.intoto.json only (every version has it), and with provenance and model.sig (an EC
P-256 key, OpenSSF model signing), alternating in this one process; medians of --rounds, and the
ratios against the plain registration. --mib adds a model of that many MiB of weights (16 files),
where the second read of every file that signing makes shows.

    .venv/bin/python bench/signing.py [--rounds 15] [--mib 256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.history.model_registry import Registry  # noqa: E402
from runner.history.sealing import Seal  # noqa: E402
from runner.history.store import Store  # noqa: E402

SECRET = "BENCH_SIGNING_KEY"


def example_model(root: Path, hidden_units: int) -> Path:
    """examples/mnist-keras's model, saved as its train.py saves it (untrained: the bytes are the same size)."""
    import keras

    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(hidden_units, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    (root / "model").mkdir(parents=True)
    model.save(root / "model" / "digits.keras")
    return root / "model"


def large_model(root: Path, mib: int, files: int = 16) -> Path:
    folder = root / "large"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(os.urandom(64 << 10))
    chunk = (mib << 20) // files
    for number in range(files):
        (folder / "variables" / f"variables.data-{number:05d}-of-{files:05d}").write_bytes(os.urandom(chunk))
    return folder


def private_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def run_dir(root: Path) -> Path:
    """A run's records as a finished run leaves them, for the provenance to read."""
    import yaml

    folder = root / "run"
    folder.mkdir()
    (folder / "run.json").write_text(
        json.dumps(
            {
                "run_id": "digits-1",
                "git": {"commit": "0" * 40, "dirty": False},
                "phases": [{"phase": "Running", "started": time.time()}],
            }
        )
    )
    lock = {
        "tftrain_version": "bench",
        "manifest": yaml.safe_load((REPO / "examples" / "mnist-keras" / "tftrain.yml").read_text()),
        "manifest_path": str(REPO / "examples" / "mnist-keras" / "tftrain.yml"),
        "environment": {"framework_version": "2.18.1"},
        "inputs": {},
        "plan": {"target": "local", "launcher": "single", "tasks": [{}]},
    }
    (folder / "manifest.lock.yml").write_text(yaml.safe_dump(lock))
    return folder


def measure(registry: Registry, model: Path, seals: dict[str, Seal | None], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in seals}
    for _ in range(rounds):
        for name, seal in seals.items():  # alternating: a slower moment costs every variant alike
            started = time.perf_counter()
            registry.register(f"bench-{name}", model, None, {}, seal=seal)
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def report(title: str, medians: dict[str, float]) -> None:
    plain = medians["plain"]
    print(title)
    for name, seconds in medians.items():
        print(f"  {name:<22} {seconds * 1000:9.1f} ms   {seconds / plain:5.2f}× plain")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--hidden-units", type=int, default=128, help="examples/mnist-keras's default")
    parser.add_argument("--mib", type=int, default=0, help="also a model of this many MiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tftrain-signing-bench-") as tmp:
        root = Path(tmp)
        records = run_dir(root)
        seals = {
            "plain": None,
            "provenance": Seal(records / "run.json", records / "manifest.lock.yml"),
            "provenance + model.sig": Seal(
                records / "run.json", records / "manifest.lock.yml", SECRET, environ={SECRET: private_key()}
            ),
        }
        registry = Registry(Store(root / "home"))
        model = example_model(root / "example", args.hidden_units)
        size = sum(p.stat().st_size for p in model.rglob("*") if p.is_file())
        measure(registry, model, seals, 1)  # imports (model_signing, cryptography, PyYAML) and first writes: not timed
        report(
            f"examples/mnist-keras model ({size / 1024:.0f} KiB, 1 file), medians of {args.rounds}:",
            measure(registry, model, seals, args.rounds),
        )
        if args.mib:
            large = large_model(root, args.mib)
            report(
                f"{args.mib} MiB model (17 files), medians of {max(3, args.rounds // 5)}:",
                measure(registry, large, seals, max(3, args.rounds // 5)),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
