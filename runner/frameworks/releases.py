"""What each TensorFlow release needs: default images, CUDA/cuDNN, Horovod compatibility.

GPU columns follow TensorFlow's published "tested build configurations" for Linux.
"""

from __future__ import annotations

from typing import NamedTuple


class Framework(NamedTuple):
    version: str  # major.minor
    python: str
    cuda: str
    cudnn: str

    def image(self, use_gpu: bool, patch: str | None = None) -> str:
        tag = patch or f"{self.version}.0"
        return f"tensorflow/tensorflow:{tag}{'-gpu' if use_gpu else ''}"


FRAMEWORKS = {
    f.version: f
    for f in (
        Framework("2.12", "3.8-3.11", "11.8", "8.6"),
        Framework("2.13", "3.8-3.11", "11.8", "8.6"),
        Framework("2.14", "3.9-3.11", "11.8", "8.7"),
        Framework("2.15", "3.9-3.11", "12.2", "8.9"),
        Framework("2.16", "3.9-3.12", "12.3", "8.9"),
        Framework("2.17", "3.9-3.12", "12.3", "8.9"),
        Framework("2.18", "3.9-3.12", "12.5", "9.3"),
        Framework("2.19", "3.9-3.12", "12.5", "9.3"),
        Framework("2.20", "3.9-3.13", "12.5", "9.3"),
        # 2.21: not yet in the tested-build-configurations pages this project could read; Python
        # and CUDA/cuDNN come from the wheel's metadata (cp310-cp313; `and-cuda` requires
        # nvidia-cuda-runtime-cu12>=12.5.82, nvidia-cudnn-cu12>=9.3.0.75), checked 2026-11-23.
        Framework("2.21", "3.10-3.13", "12.5", "9.3"),
    )
}
DEFAULT_VERSION = "2.18"
# Horovod 0.28.1 (its last release) builds against these TensorFlow releases only.
HOROVOD = "horovod==0.28.1"
HOROVOD_FRAMEWORKS = ("2.15", "2.16", "2.17", "2.18")


def horovod_compatible(version: str | None) -> bool:
    return version is None or ".".join(version.split(".")[:2]) in HOROVOD_FRAMEWORKS


def uses_keras3(version: str | None) -> bool:
    """TensorFlow ≥ 2.16 ships Keras 3, which Horovod's Keras API does not support."""
    major, minor = (int(part) for part in (version or DEFAULT_VERSION).split(".")[:2])
    return (major, minor) >= (2, 16)


def tf_keras_requirement(version: str | None) -> str | None:
    """tf-keras for Horovod's Keras API where TensorFlow ships Keras 3 (`tf-keras==2.18.*`), else None."""
    if not uses_keras3(version):
        return None
    return f"tf-keras=={'.'.join((version or DEFAULT_VERSION).split('.')[:2])}.*"


def framework(version: str | None) -> Framework | None:
    return FRAMEWORKS.get(".".join((version or DEFAULT_VERSION).split(".")[:2]))


def requirement(use_gpu: bool, version: str | None) -> str:
    """The pip requirement for TensorFlow: `tensorflow-cpu==2.18.*`, `tensorflow[and-cuda]==2.18.1`."""
    package = "tensorflow[and-cuda]" if use_gpu else "tensorflow-cpu"
    if version is None:
        return package
    return f"{package}=={version}" if version.count(".") == 2 else f"{package}=={version}.*"


def default_base_image(version: str | None, use_gpu: bool) -> str | None:
    """The official TensorFlow image for this version, or None for versions not in the table."""
    found = framework(version)
    if found is None:
        return None
    patch = version if version and version.count(".") == 2 else None
    return found.image(use_gpu, patch)
