"""A small Keras classifier of raw sensor readings (data.py), served as it is trained.

--normalize inside (the default): the model starts with a Normalization layer adapted to the
training data, so the served model takes raw readings, as production sends them.
--normalize outside: the script standardises the readings itself before training and the saved model
has no such layer — the classic training/serving skew: the model now expects standardised readings,
production still sends raw ones. The gate cannot see it (the model loads and predicts); a replay of recorded
requests does (tftrain.yml's model.replay).
--style functional: the same model written with Keras's functional API (a refactor).

Writes outputs/model (a SavedModel, as TensorFlow Serving loads it) and prints the accuracy.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import data  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--normalize", choices=["inside", "outside"], default="inside")
    parser.add_argument("--style", choices=["sequential", "functional"], default="sequential")
    return parser.parse_args()


def layers(x_train, inside: bool):
    normalization = [keras.layers.Normalization()] if inside else []
    for layer in normalization:
        layer.adapt(x_train)
    return normalization + [
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(data.CLASSES, activation="softmax"),
    ]


def build(x_train, inside: bool, style: str):
    if style == "sequential":
        model = keras.Sequential([keras.Input(shape=(data.FEATURES,), name="readings"), *layers(x_train, inside)])
    else:
        inputs = keras.Input(shape=(data.FEATURES,), name="readings")
        outputs = inputs
        for layer in layers(x_train, inside):
            outputs = layer(outputs)
        model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def main():
    args = parse_args()
    keras.utils.set_random_seed(0)
    x, y = data.training_split()
    inside = args.normalize == "inside"
    if not inside:  # standardised here, and only here: the served model never learns of it
        x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype(np.float32)
    model = build(x, inside, args.style)
    model.fit(x, y, epochs=args.epochs, batch_size=64, validation_split=0.1, verbose=2)
    _, accuracy = model.evaluate(x, y, verbose=0)
    print(f"accuracy: {accuracy:.4f}")
    model.export("outputs/model", verbose=False)


if __name__ == "__main__":
    main()
