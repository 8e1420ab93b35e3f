# An Azure ML entry script, unchanged: init() rebuilds the model from model.json + weights found
# through Model.get_model_path; run() takes {"data": [[64 pixel values], ...]} and answers the
# class index of each row.
import json
import os

import numpy as np
from azureml.core.model import Model
from tensorflow.keras.models import model_from_json


def init():
    global model
    model_root = Model.get_model_path("azure-keras-scoring")
    with open(os.path.join(model_root, "model.json")) as handle:
        model = model_from_json(handle.read())
    model.load_weights(os.path.join(model_root, "model.weights.h5"))


def run(raw_data):
    data = np.array(json.loads(raw_data)["data"], dtype=np.float32)
    return np.argmax(model.predict(data, verbose=0), axis=1).tolist()
