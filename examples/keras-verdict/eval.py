"""`eval.py --model DIR --out FILE`: the per-example file train.py writes, for any model this
example saved (the one .keras file under DIR, or DIR itself): tftrain evaluates the production
model this way on this run's evaluation set. Exit 1 with one line when there is no model it can
load, or the model is not one of this example's (its input or output does not fit the data)."""

import argparse
import os
import sys
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import data  # noqa: E402


class NotThisModel(Exception):
    pass


def model_file(path: Path) -> Path:
    if path.is_dir():
        found = sorted(path.rglob("*.keras"))
        if len(found) != 1:
            raise NotThisModel(f"{len(found)} .keras files under it, expected one")
        path = found[0]
    if not path.is_file():
        raise NotThisModel("no such file or directory")
    if not zipfile.is_zipfile(path):
        raise NotThisModel(f"{path.name} is not a .keras (zip) file")
    return path


def load(path: Path):
    import keras

    try:
        model = keras.saving.load_model(model_file(path), compile=False)
    except NotThisModel:
        raise
    except Exception as exc:  # whatever Keras says about a file it cannot read: its first line
        raise NotThisModel(f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}") from None
    inputs, outputs = tuple(model.input_shape), tuple(model.output_shape)
    if inputs != (None, data.FEATURES) or outputs != (None, data.CLASSES):
        raise NotThisModel(
            f"takes {inputs} and gives {outputs}; this example's models take (None, {data.FEATURES}) and give (None,"
            f" {data.CLASSES})"
        )
    return model


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--model", required=True, type=Path, help="a model directory (or .keras file) this example saved"
    )
    parser.add_argument("--out", required=True, help="the per-example JSON Lines file to write")
    args = parser.parse_args()
    try:
        model = load(args.model)
    except NotThisModel as exc:
        sys.exit(f"eval.py: cannot evaluate the model at {args.model}: {exc}")
    accuracy, loss = data.write_per_example(model, data.evaluation_split(), args.out)
    print(f"eval loss: {loss:.4f}")
    print(f"eval accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
