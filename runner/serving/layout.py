"""A registered version's directory as the gate leaves it (TFTRAIN_HOME/models/NAME/vN, or a copy
of one): model/, serving/ (serving.json, sample.npz, predictions.npz), model.onnx; and the release
assets that carry the same files. The standard library only: the model server reads it too."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from runner.history.untrusted import optional_mapping
from runner.serving.signature import Located, candidates, locate

# a release's asset → where it goes in the version directory (the registry's own layout)
RELEASE_ASSETS = {
    "serving.json": "serving/serving.json",
    "serving-sample.npz": "serving/sample.npz",
    "serving-predictions.npz": "serving/predictions.npz",
    "model.onnx": "model.onnx",
}
# model.replay's report and the requests it replayed (runner.replay.promotion), in a version's serving/
REPLAY_REPORT = "replay.json"
REPLAY_REQUESTS = "replay-requests.jsonl"
RELEASE_ASSETS.update({name: f"serving/{name}" for name in (REPLAY_REPORT, REPLAY_REQUESTS)})


# an evaluation's evidence (runner.verdict.layout reads it): evaluation/evaluation.json and
# evaluation/seed-N.jsonl in a version, the assets evaluation.json and evaluation-seed-N.jsonl in a release
EVALUATION_DIR = "evaluation"
EVALUATION_SUMMARY = "evaluation.json"
SEED_FILE = re.compile(r"seed-(0|[1-9][0-9]{0,3})\.jsonl")
MAX_SEEDS = 100  # seeds one evidence set holds at most
MAX_EVIDENCE_BYTES = 1 << 30  # one seed's file at most: a million rows of JSON are ~50 MB


def evaluation_asset(relative: str) -> str:
    """A file of the version's evaluation/ as a release asset (assets have no folders):
    evaluation/seed-0.jsonl → evaluation-seed-0.jsonl, evaluation/evaluation.json → evaluation.json."""
    name = Path(relative).name
    return name if name == EVALUATION_SUMMARY else f"{EVALUATION_DIR}-{name}"


def evaluation_relative(asset: str) -> str | None:
    """The inverse of evaluation_asset, None for any other asset."""
    if asset == EVALUATION_SUMMARY:
        return f"{EVALUATION_DIR}/{EVALUATION_SUMMARY}"
    prefix = f"{EVALUATION_DIR}-"
    if asset.startswith(prefix) and SEED_FILE.fullmatch(asset[len(prefix) :]):
        return f"{EVALUATION_DIR}/{asset[len(prefix) :]}"
    return None


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
        if (
            isinstance(recorded, str)
            and recorded not in ("", ".")
            and self.model.is_dir()
            and not self.model.is_symlink()
        ):
            return next((found for found in candidates(self.model) if found.relative == recorded), None)
        return locate(self.model)
