"""A small Keras classifier whose evaluation tftrain judges per example (`evaluation:` in tftrain.yml).

An ordinary training script: it never seeds anything itself. tftrain runs it once per seed with
TFTRAIN_SEED=0, 1, … and (evaluation.set_seed, the default) seeds Python, NumPy, TensorFlow and
Keras from it before the first line, so initialisation, shuffling and dropout differ between
seeds and repeat within one. The data does not change with the seed (data.py).

Writes outputs/model/classifier.keras and outputs/eval.jsonl (one row per evaluation example:
id, correct, loss), and prints the evaluation's accuracy and loss for tftrain's metrics.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import data  # noqa: E402
import keras  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.002)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument(
        "--label-noise",
        type=float,
        default=0.0,
        help="the fraction of training labels made wrong (a degraded candidate)",
    )
    args = parser.parse_args()
    if not 0.0 <= args.label_noise < 1.0:
        parser.error("--label-noise must be a fraction in [0, 1)")
    return args


def build(hidden, learning_rate):
    model = keras.Sequential(
        [
            keras.Input(shape=(data.FEATURES,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(data.CLASSES, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model


def main():
    args = parse_args()
    print(f"TFTRAIN_SEED={os.environ.get('TFTRAIN_SEED', '(unset)')}")
    train = data.training_split(args.label_noise)
    evaluation = data.evaluation_split()
    print(f"training on {len(train.y)} examples (label noise {args.label_noise}), evaluating on {len(evaluation.y)}")

    model = build(args.hidden, args.learning_rate)
    model.fit(train.x, train.y, epochs=args.epochs, batch_size=args.batch_size, validation_split=0.1, verbose=2)

    os.makedirs("outputs/model", exist_ok=True)
    model.save("outputs/model/classifier.keras")
    accuracy, loss = data.write_per_example(model, evaluation, "outputs/eval.jsonl")
    print(f"eval loss: {loss:.4f}")
    print(f"eval accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
