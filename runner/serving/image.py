"""The serving image of a registered model version, in two layers of caching:

- the environment image: a base with Python, a virtualenv holding the serving requirements
  (KServe, the model's TensorFlow), a non-root user. Tagged by a hash of its Dockerfile and the
  base image's id, and built only when no image has that tag: TensorFlow is downloaded once per
  machine and release, not once per deploy;
- the model image: FROM the environment, plus tftrain's runner package and the version at
  /models/NAME (model/, serving/, model.onnx). Tagged IMAGE:NAME-vN and IMAGE:sha-<hash of its
  content>, so a version deployed twice is the same image.

Only data and rendering here (and the docker calls that build); running and pushing are the
deploy command's. Image references reach the templates parsed (runner.serving.imageref), never
as the text a user typed. The image holds no key: the server reads TFTRAIN_SERVING_TOKEN from the
container's environment when it runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import runner
from runner.environments import CA_NAME, CONSTRAINTS_NAME, ImageSpec
from runner.errors import DeployError, RegistryError
from runner.frameworks.serving import (
    VERIFIER,
    framework_constraints,
    scoring_requirements,
    serving_constraints,
    serving_requirements,
)
from runner.history.checksums import sha256_file, sums_of
from runner.history.model_registry import SUMS, ModelVersion, checkout_version, damaged
from runner.serving.imageref import TAG, ImageReference
from runner.serving.layout import VersionDir
from runner.serving.scoring.script import packages_of, scoring_of
from runner.templates import render

PORT = 8080
MODELS_DIR = "/models"
USER_ID = 1000  # numeric, so that Kubernetes' runAsNonRoot can check it without /etc/passwd
DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"
LABEL = "tftrain.serving"
OCI = "org.opencontainers.image"
ONNX_FILE = "model.onnx"
# \Z, never $: `$` matches before a final newline
QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[KMGT]i?|m|k)?\Z")
UNITS = {
    None: 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


@dataclass(frozen=True)
class ServingResources:
    """version.json "serving_resources" (the manifest's model.serving): what one replica gets."""

    cpu: str = "1"
    memory: str = "2Gi"
    gpu: int = 0

    @classmethod
    def of(cls, info: dict) -> ServingResources:
        given = info.get("serving_resources") or {}
        resources = cls(
            str(given.get("cpu", cls.cpu)), str(given.get("memory", cls.memory)), int(given.get("gpu") or 0)
        )
        resources.nano_cpus(), resources.memory_bytes()  # fail here, before anything is built
        return resources

    def nano_cpus(self) -> int:
        match = QUANTITY.match(self.cpu)
        if not match or match["unit"] not in (None, "m"):
            raise DeployError(f"serving_resources.cpu {self.cpu!r} is not a CPU quantity like 1, 0.5 or 500m")
        cores = float(match["number"]) / (1000 if match["unit"] == "m" else 1)
        return max(1, int(cores * 1e9))

    def memory_bytes(self) -> int:
        match = QUANTITY.match(self.memory)
        if not match or match["unit"] == "m":
            raise DeployError(f"serving_resources.memory {self.memory!r} is not a memory quantity like 2Gi or 512Mi")
        return int(float(match["number"]) * UNITS[match["unit"]])


@dataclass(frozen=True)
class VersionFiles:
    """A version copied out for the build (context/): model/, serving/, model.onnx, all verified."""

    model: ModelVersion
    dir: VersionDir  # holds model/ and, when the version has them, serving/ and model.onnx
    serving: dict | None  # serving.json's content; None for a version registered before serving/

    @property
    def root(self) -> Path:
        return self.dir.root

    @property
    def sample(self) -> Path | None:
        return self.dir.sample if self.serving else None

    @property
    def predictions(self) -> Path | None:
        return self.dir.predictions if self.serving else None

    @property
    def onnx(self) -> bool:
        return self.dir.onnx.is_file()

    @property
    def scoring(self) -> dict | None:
        """serving.json's "scoring": the version is served by its scoring script (runner.serving.scoring.server)."""
        return scoring_of(self.serving)

    @property
    def scoring_packages(self) -> tuple[str, ...] | None:
        if self.scoring is None:
            return None
        try:
            return packages_of(self.scoring)
        except ValueError as exc:
            raise DeployError(f"model {self.model.label}: {exc}") from None

    @property
    def tensorflow(self) -> str | None:
        """The TensorFlow release the gate loaded the model with, else the run's."""
        return (self.serving or {}).get("tensorflow") or self.model.info.get("framework_version")


def copy_version(model: ModelVersion, root: Path) -> VersionFiles:
    """Copy `model` into root (absent or empty), every file verified (registry.checkout_version).
    RegistryError for anything damaged, DeployError for a version that holds no model a server can load."""
    checkout_version(model, root)
    version = VersionDir(root)
    serving = version.serving()
    if model.info.get("serving") and serving is None:
        raise damaged(model, "serving/serving.json is missing or cannot be read")
    if serving is None and version.located() is None:
        raise DeployError(
            f"model {model.label} has no serving signature (registered before serving/) and model/ holds no "
            "SavedModel or .keras/.h5 file a server can load"
        )
    return VersionFiles(model, version, serving)


def model_sha256(model: ModelVersion) -> str:
    """One digest for the model's files: the sha256 of the version's SHA256SUMS."""
    try:
        return sha256_file(model.path / SUMS)
    except OSError as exc:
        raise RegistryError(f"model {model.label}: {SUMS} cannot be read ({exc.strerror})") from None


# --- the environment image -----------------------------------------------------------------


def environment_spec(
    base: ImageReference,
    base_image_id: str | None,
    tensorflow: str | None,
    onnx: bool,
    ca_bundle: Path | None,
    scoring: tuple[str, ...] | None = None,
    verifier: bool = False,
) -> ImageSpec:
    """`base` is a parsed reference (imageref): what goes into FROM is one word of Docker's grammar.
    `scoring`: the packages of a scoring script's environment (azmlinfsrv instead of KServe);
    `verifier`: OpenSSF model signing too, for the init container (runner.serving.verify_model)."""
    if not isinstance(base, ImageReference):  # text never reaches the template unparsed
        raise TypeError(f"environment_spec takes an ImageReference, not {type(base).__name__}")
    base_image = str(base)
    if scoring is not None:
        packages, constraints = scoring_requirements(tensorflow, scoring), framework_constraints(tensorflow)
    else:
        packages, constraints = serving_requirements(tensorflow, onnx=onnx), serving_constraints(tensorflow)
    if verifier:
        packages = (*packages, *VERIFIER)
    files = {CONSTRAINTS_NAME: constraints.encode()} if constraints else {}
    dockerfile = render(
        "Dockerfile.serve.j2",
        stage="environment",
        tftrain_version=runner.__version__,
        base_image=base_image,
        packages=packages,
        user_id=USER_ID,
        ca_bundle=CA_NAME if ca_bundle else None,
        constraints=CONSTRAINTS_NAME if constraints else None,
        quote=shlex.quote,
    )
    content = _digest(dockerfile, files, base_image_id or base_image)
    labels = {
        f"{LABEL}.environment": content,
        f"{LABEL}.packages": " ".join(packages),
        f"{LABEL}.base-image": base_image,
    }
    return ImageSpec(
        "serving-environment",
        base_image,
        dockerfile,
        files,
        f"tftrain-serve/environment:{content[:16]}",
        labels,
        ca_bundle,
    )


# --- the model image -----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelImage:
    spec: ImageSpec
    repository: str
    version_tag: str  # NAME-vN
    content_tag: str  # sha-<content hash>

    @property
    def tags(self) -> tuple[str, str]:
        return f"{self.repository}:{self.content_tag}", f"{self.repository}:{self.version_tag}"


def model_image_spec(
    files: VersionFiles, repository: str, environment: ImageSpec, environment_id: str, base_image: str
) -> ModelImage:
    model = files.model
    name = model.name
    version_tag = f"{name}-v{model.version}"
    if not re.fullmatch(TAG, version_tag):
        raise DeployError(f"model name {name!r} does not make a valid image tag ({version_tag!r})")
    context = {f"version/{path}": (files.root / path).read_bytes() for path in sums_of(files.root)}
    package = Path(runner.__file__).resolve().parent
    context.update(
        (f"runner/{path.relative_to(package).as_posix()}", path.read_bytes())
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.relative_to(package).parts
    )
    dockerfile = render(
        "Dockerfile.serve.j2",
        stage="model",
        tftrain_version=runner.__version__,
        environment=environment.tag,
        model_dir=f"{MODELS_DIR}/{name}",
        command=json.dumps(server_command(name, scoring=files.scoring is not None)),
        port=PORT,
        user_id=USER_ID,
    )
    content = _digest(dockerfile, context, environment_id)
    git = model.info.get("git") or {}
    labels = {
        f"{OCI}.title": name,
        f"{OCI}.version": f"v{model.version}",
        f"{OCI}.revision": git.get("commit") or "",
        f"{OCI}.created": _rfc3339(model.created),
        f"{OCI}.description": f"tftrain model server for {model.label}",
        f"{OCI}.base.name": base_image,
        "tftrain.model.name": name,
        "tftrain.model.version": str(model.version),
        "tftrain.model.commit": git.get("commit") or "",
        "tftrain.model.sha256": model_sha256(model),
        "tftrain.model.run-id": model.run_id or "",
        f"{LABEL}.content-hash": content,
        f"{LABEL}.environment": environment.labels[f"{LABEL}.environment"],
    }
    content_tag = f"sha-{content[:16]}"
    spec = ImageSpec(name, environment.tag, dockerfile, context, f"{repository}:{content_tag}", labels)
    return ModelImage(spec, repository, version_tag, content_tag)


def server_command(name: str, scoring: bool = False) -> list[str]:
    """The image's CMD: the model server of runner.serving.server (or, for a version with a scoring
    script, runner.serving.scoring.server: azmlinfsrv) on all interfaces (a container's)."""
    module = "runner.serving.scoring.server" if scoring else "runner.serving.server"
    return [
        "python",
        "-m",
        module,
        "--model-dir",
        f"{MODELS_DIR}/{name}",
        "--name",
        name,
        "--host",
        "0.0.0.0",
        "--port",
        str(PORT),
    ]


def _digest(dockerfile: str, files: dict[str, bytes], base: str) -> str:
    digest = hashlib.sha256(dockerfile.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    digest.update(base.encode())
    return digest.hexdigest()


def _rfc3339(timestamp: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
