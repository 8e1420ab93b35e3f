"""A registered version's directory as the gate leaves it (TFTRAIN_HOME/models/NAME/vN, or a copy
of one): model/, serving/ (serving.json, sample.npz, predictions.npz), model.onnx; and the release
assets that carry the same files. The standard library only: the model server reads it too."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from runner.serving.signature import Located, candidates, locate
from runner.history.untrusted import optional_mapping

# a release's asset → where it goes in the version directory (the registry's own layout)
RELEASE_ASSETS = {
    "serving.json": "serving/serving.json",
    "serving-sample.npz": "serving/sample.npz",
    "serving-predictions.npz": "serving/predictions.npz",
    "model.onnx": "model.onnx",
}


class Runtime(str, enum.Enum):
    TENSORFLOW = "tensorflow"
    ONNX = "onnx"


@dataclass(frozen=True)
class VersionDir:
    """TFTRAIN_HOME/models/NAME/vN as the gate leaves it (or a copy of one)."""

    root: Path

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def serving_json(self) -> Path:
        return self.root / "serving" / "serving.json"

    @property
    def sample(self) -> Path:
        return self.root / "serving" / "sample.npz"

    @property
    def predictions(self) -> Path:
        return self.root / "serving" / "predictions.npz"

    @property
    def onnx(self) -> Path:
        return self.root / "model.onnx"

    def serving(self) -> dict | None:
        """serving.json, or None for a version registered before the gate wrote one."""
        return optional_mapping(self.serving_json) or None

    def located(self) -> Located | None:
        """The loadable model: the one at the top of model/ that serving.json names (the gate
        checked it), else the one model/ holds."""
        recorded = (self.serving() or {}).get("path")
        if isinstance(recorded, str) and recorded not in ("", ".") and self.model.is_dir() and not self.model.is_symlink():
            return next((found for found in candidates(self.model) if found.relative == recorded), None)
        return locate(self.model)
