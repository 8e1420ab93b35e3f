"""Azure ML's `Model.get_model_path`, for scoring scripts served by tftrain (runner/serving/scoring*).

Where the script runs (`tftrain serve`, the serving image, the gate), AZUREML_MODEL_DIR is the
registered version's model/ directory, as on Azure, and TFTRAIN_MODEL_NAME the model's name.
`Model.get_model_path('NAME')` returns what Azure returns for a single-model deployment: the
registered path itself (TFTRAIN_MODEL_PATH) — model/ for a registered directory, the file in it
for a registered file. Another name is an error naming the one served (Azure's ModelNotFoundException). Standard
library only: imported inside the serving environment.
"""

from __future__ import annotations

import os

from runner.compat.run_context import _not_supported

MODEL_DIR = "AZUREML_MODEL_DIR"
MODEL_NAME = "TFTRAIN_MODEL_NAME"
MODEL_VERSION = "TFTRAIN_MODEL_VERSION"
MODEL_PATH = "TFTRAIN_MODEL_PATH"  # what get_model_path returns: the registered directory, or its one file


class ModelNotFoundError(Exception):
    """The name (or version) is not the model this server was started with."""


class Model:
    """The registered model a scoring script loads; only get_model_path is provided."""

    def __init__(self, *args, **kwargs) -> None:
        raise _not_supported("Model()")

    @staticmethod
    def get_model_path(model_name: str, version: int | None = None, _workspace=None) -> str:
        directory, served = os.environ.get(MODEL_DIR), os.environ.get(MODEL_NAME)
        if not directory or not served:
            raise ModelNotFoundError(
                f"Model.get_model_path({model_name!r}): no model is being served here "
                f"({MODEL_DIR} is not set; tftrain sets it where the scoring script runs)"
            )
        if model_name != served:
            raise ModelNotFoundError(f"Model.get_model_path({model_name!r}): the model served here is {served!r}")
        number = os.environ.get(MODEL_VERSION)
        if version is not None and number and str(version) != number:
            raise ModelNotFoundError(
                f"Model.get_model_path({model_name!r}, version={version}): the version served is {number}"
            )
        return os.environ.get(MODEL_PATH) or directory
