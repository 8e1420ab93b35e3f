
import os
import tensorflow as tf
import numpy as np

def mnist_dataset(batch_size):
  # tftrain: the tutorial's one change. tf.keras.datasets.mnist.load_data() downloads MNIST; this
  # example trains offline, on synthetic 28x28 uint8 digits of the same shapes and types.
  (x_train, y_train), _ = synthetic_mnist()
  # The `x` arrays are in uint8 and have values in the [0, 255] range.
  # You need to convert them to float32 with values in the [0, 1] range.
  x_train = x_train / np.float32(255)
  y_train = y_train.astype(np.int64)
  train_dataset = tf.data.Dataset.from_tensor_slices(
      (x_train, y_train)).shuffle(60000).repeat().batch(batch_size)
  return train_dataset

def build_and_compile_cnn_model():
  model = tf.keras.Sequential([
      tf.keras.layers.InputLayer(input_shape=(28, 28)),
      tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
      tf.keras.layers.Conv2D(32, 3, activation='relu'),
      tf.keras.layers.Flatten(),
      tf.keras.layers.Dense(128, activation='relu'),
      tf.keras.layers.Dense(10)
  ])
  model.compile(
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      optimizer=tf.keras.optimizers.SGD(learning_rate=0.001),
      metrics=['accuracy'])
  return model


def synthetic_mnist(count=6000, seed=0):
  """MNIST's shapes and types ((count, 28, 28) uint8 images, int labels 0-9), offline: each digit
  is noise plus a bright band whose row tells the label, so the model can learn it."""
  rng = np.random.default_rng(seed)
  y = rng.integers(0, 10, count).astype(np.uint8)
  x = rng.integers(0, 80, (count, 28, 28)).astype(np.uint8)
  for label in range(10):
    x[y == label, 2 + 2 * label:4 + 2 * label, 4:24] = 255
  return (x, y), (x[:0], y[:0])
