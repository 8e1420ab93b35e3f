"""`eval.py --model DIR --out FILE`: the per-example file train.py writes, for any model this
example saved (a .keras file in DIR, or DIR itself): tftrain evaluates the production model this
way on this run's evaluation set. Exit 2 with one line when there is no model it can load."""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def model_file(path: Path) -> Path:
    if path.is_file():
        return path
    if not path.is_dir():
        raise ValueError(f"{path}: no such file or directory")
    found = sorted(path.rglob("*.keras"))
    if len(found) != 1:
        raise ValueError(f"{path}: {len(found)} .keras files, expected one")
    return found[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, type=Path, help="a model directory (or .keras file) this example saved")
    parser.add_argument("--out", required=True, help="the per-example JSON Lines file to write")
    args = parser.parse_args()
    try:
        path = model_file(args.model)
        import keras

        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # any reason a model does not load: one line, no traceback
        sys.exit(f"eval.py: cannot load a model from {args.model}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    import data

    accuracy, loss = data.write_per_example(model, data.evaluation_split(), args.out)
    print(f"eval loss: {loss:.4f}")
    print(f"eval accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
