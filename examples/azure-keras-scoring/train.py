# An Azure ML training script, unchanged: it logs through Run.get_context() and saves the model
# the way Azure's Keras samples do (model.json + weights), for score.py to rebuild.
import argparse
import os

import numpy as np
import tensorflow as tf
from azureml.core import Run
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

run = Run.get_context()
digits = load_digits()
x = (digits.data / 16.0).astype(np.float32)
x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.2, random_state=0)

model = tf.keras.Sequential(
    [
        tf.keras.Input(shape=(64,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ]
)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x_train, y_train, epochs=args.epochs, batch_size=args.batch_size, verbose=2)
loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
run.log("loss", float(loss))
run.log("accuracy", float(accuracy))
print(f"test accuracy: {accuracy:.4f}")

os.makedirs("outputs/model", exist_ok=True)
with open("outputs/model/model.json", "w") as handle:
    handle.write(model.to_json())
model.save_weights("outputs/model/model.weights.h5")
print("model saved to outputs/model")
