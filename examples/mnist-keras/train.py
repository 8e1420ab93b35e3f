"""Handwritten digits with Keras, the way an Azure ML TensorFlow estimator script is written:
flags from argparse, data from a folder or a bundled dataset, the model saved under ./outputs.

The data is scikit-learn's bundled 8x8 digits (1,797 images): no download, so it runs offline.
"""

import argparse
import os

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--hidden-units", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def main():
    args = parse_args()
    keras.utils.set_random_seed(args.seed)
    digits = load_digits()
    x = (digits.images.reshape(len(digits.images), -1) / 16.0).astype("float32")
    y = digits.target.astype("int32")
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=args.seed, stratify=y)
    print(f"training on {len(x_train)} images, testing on {len(x_test)}")

    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(args.hidden_units, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(
        x_train,
        y_train,
        epochs=args.epochs,
        batch_size=args.batch_size,
        validation_split=0.1,
        callbacks=[keras.callbacks.TensorBoard(log_dir=os.path.join("logs", "tensorboard"))],
        verbose=2,
    )
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"test loss: {loss:.4f}")
    print(f"test accuracy: {accuracy:.4f}")

    os.makedirs("outputs/model", exist_ok=True)
    model.save("outputs/model/digits.keras")
    predictions = np.argmax(model.predict(x_test[:10], verbose=0), axis=1)
    print(f"first predictions: {predictions.tolist()} (truth {y_test[:10].tolist()})")


if __name__ == "__main__":
    main()
