"""What a serving or export environment holds, pinned to the sets that resolve together here
(kserve 0.16.0's constraints keep fastapi, uvicorn and protobuf where TensorFlow can live)."""

from __future__ import annotations

from runner.frameworks.curated import constraints_for, major_minor
from runner.frameworks.releases import DEFAULT_VERSION, requirement

KSERVE = "kserve==0.16.0"
# KServe 0.16.0 needs protobuf < 6, TensorFlow 2.21 ≥ 6.31: a 2.21 model is served by KServe 0.21.0
# (protobuf 6.x, which TensorFlow 2.21 accepts), and its environment takes protobuf from KServe's range
# instead of the set's 7.x. runner/serving/server.py is tested with both (tests/integration/serving).
KSERVE_FOR = {"2.21": "kserve==0.21.0"}
SERVER_OWNS = {"2.21": ("protobuf",)}  # the set's pins the model server's own range replaces
ONNXRUNTIME = "onnxruntime>=1.17,<2"
AZMLINFSRV = "azureml-inference-server-http==1.5.1"  # Azure's server for scoring scripts (gunicorn + Flask)
TF2ONNX = "tf2onnx==1.17.0"
ONNX_OPSET = 15  # tf2onnx 1.17's default; 18 is its newest
# tf2onnx 1.17 is tested with TensorFlow 2.13–2.15 and converts 2.16–2.21 SavedModels here
# (checked: 2.18.1 and 2.21.0); a run on another release converts in an environment of this one.
TF2ONNX_TENSORFLOW = ("2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.20", "2.21")
EXPORT_FALLBACK = "2.18"
# The image's init container verifies the version against its model.sig (runner.serving.verify_model):
# OpenSSF model signing, and pyOpenSSL, which model-signing 1.1.1 imports without declaring it.
VERIFIER = ("model-signing==1.1.1", "pyopenssl>=24")


def serving_requirements(framework_version: str | None, onnx: bool = False) -> tuple[str, ...]:
    """The model server's packages: KServe, TensorFlow of the model's release (CPU), numpy,
    and ONNX Runtime when the server runs model.onnx."""
    release = major_minor(framework_version or DEFAULT_VERSION)
    packages = [KSERVE_FOR.get(release, KSERVE), requirement(False, framework_version or DEFAULT_VERSION)]
    if onnx:
        packages.append(ONNXRUNTIME)
    return tuple(packages)


def framework_constraints(framework_version: str | None) -> str | None:
    """The release's tested set for these environments' TensorFlow (None: a patch other than the
    set's, or a release without one); KServe's and tf2onnx's own pins resolve with it."""
    return constraints_for(framework_version or DEFAULT_VERSION)


def serving_constraints(framework_version: str | None) -> str | None:
    """The tested set for the model server's environment, less the pins KServe's own range replaces."""
    version = framework_version or DEFAULT_VERSION
    return constraints_for(version, SERVER_OWNS.get(major_minor(version), ()))


def export_tensorflow(framework_version: str | None) -> str:
    """The TensorFlow release the ONNX export runs with: the run's own where tf2onnx handles it."""
    wanted = major_minor(framework_version)
    return wanted if wanted in TF2ONNX_TENSORFLOW else EXPORT_FALLBACK


def export_requirements(framework_version: str | None) -> tuple[str, ...]:
    return (requirement(False, export_tensorflow(framework_version)), TF2ONNX, ONNXRUNTIME)


def export_constraints(framework_version: str | None) -> str | None:
    """The tested set the export environment installs with: its TensorFlow release's."""
    return framework_constraints(export_tensorflow(framework_version))


def scoring_requirements(framework_version: str | None, packages: tuple[str, ...]) -> tuple[str, ...]:
    """A scoring script's server: the model's TensorFlow release (CPU), Azure's inference server
    and the packages the script asked for (model.serving.pip_packages or its conda file's)."""
    return (requirement(False, framework_version or DEFAULT_VERSION), AZMLINFSRV, *packages)
