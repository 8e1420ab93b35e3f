"""The training image: a Dockerfile rendered from templates/Dockerfile.j2, tagged by content.

The tag is a hash of everything that changes the image: the rendered Dockerfile, the files
copied into the build, and the base image's id. The training code is not among them (it is
mounted at run time), so a code-only change keeps the tag and never rebuilds.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import runner
from runner.environments.virtualenv import framework_packages
from runner.errors import UnsupportedError
from runner.frameworks.curated import constraint_set
from runner.frameworks.releases import HOROVOD, default_base_image, tf_keras_requirement
from runner.manifest import LoadedManifest
from runner.manifest.legacy_keras import keras_choice
from runner.manifest.model import Manifest, MpiTraining
from runner.templates import render

CA_NAME = "tftrain-ca.pem"
CONSTRAINTS_NAME = "tftrain-constraints.txt"  # TensorFlow's tested set, in the build context
CA_FILES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
LABEL = "tftrain"
VENV_PYTHON = "/opt/tftrain/venv/bin/python"  # where Dockerfile.j2 makes the training's virtualenv


@dataclass(frozen=True)
class ImageSpec:
    name: str
    base_image: str
    dockerfile: str
    files: dict[str, bytes] = field(hash=False)  # build-context files besides the Dockerfile
    tag: str
    labels: dict[str, str] = field(hash=False)
    ca_bundle: Path | None = None  # copied into a throw-away build stage; not part of the tag

    def context(self) -> dict[str, bytes]:
        files = {"Dockerfile": self.dockerfile.encode(), **self.files}
        if self.ca_bundle is not None:
            files[CA_NAME] = self.ca_bundle.read_bytes()  # read at build time: never a stale copy
        return files


def base_image_for(manifest: Manifest) -> str:
    if manifest.custom_docker_image:
        return manifest.custom_docker_image
    image = default_base_image(manifest.framework_version, manifest.use_gpu)
    if image is None:
        raise UnsupportedError(
            f"framework_version: no default image is known for TensorFlow {manifest.framework_version}; "
            "set custom_docker_image"
        )
    return image


def official_image_tensorboard(framework_version: str | None) -> str:
    """tensorboard for an official image without it (TensorFlow 2.21 no longer brings it): the
    tested set's version of the release."""
    found = constraint_set(framework_version)
    pin = found.pin("tensorboard") if found else None
    return f"tensorboard=={pin}" if pin else "tensorboard"


def host_ca_bundle(named: Sequence[str]) -> Path | None:
    """The CA bundle pip on this machine trusts (a proxy's CA included), for pip in the build:
    the first of `named` (runner.settings.MachineClients.ca_bundles) that is a file, else the system's."""
    candidates = [*named, *CA_FILES]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def image_spec(loaded: LoadedManifest, base_image_id: str | None = None, ca_bundle: Path | None = None) -> ImageSpec:
    manifest = loaded.manifest
    base = base_image_for(manifest)
    files: dict[str, bytes] = {}
    if manifest.pip_packages:
        files["requirements.txt"] = "".join(f"{package}\n" for package in manifest.pip_packages).encode()
    for key in ("pip_requirements_file", "conda_dependencies_file"):
        name = getattr(manifest, key)
        if name:
            files[Path(name).name] = (loaded.source_dir / name).read_bytes()
    # Official TensorFlow images hold TensorFlow already (Google's own tested build): tftrain adds
    # tensorboard where the image lacks it. A custom image gets the pinned release with its tested
    # set (a no-op when it has that version), and every pip install there uses the set.
    framework: tuple[str, ...] = ()
    constraints = None
    if manifest.custom_docker_image and manifest.framework_version:
        user_lines = [*manifest.pip_packages]
        if manifest.pip_requirements_file:
            user_lines += files[Path(manifest.pip_requirements_file).name].decode(errors="replace").splitlines()
        framework, constraints = framework_packages(manifest, user_lines)
    if constraints:
        files[CONSTRAINTS_NAME] = constraints.encode()
    mpi_image = isinstance(manifest.distributed_training, MpiTraining)
    dockerfile = render(
        "Dockerfile.j2",
        tftrain_version=runner.__version__,
        base_image=base,
        ensure_python=True,
        mpi=mpi_image,
        horovod=HOROVOD,
        tf_keras=(
            tf_keras_requirement(manifest.framework_version) if mpi_image or keras_choice(manifest).legacy else None
        ),
        conda=bool(manifest.conda_packages or manifest.conda_dependencies_file),
        conda_packages=manifest.conda_packages,
        conda_file=Path(manifest.conda_dependencies_file).name if manifest.conda_dependencies_file else None,
        framework=framework,
        constraints=CONSTRAINTS_NAME if constraints else None,
        tensorboard=None if manifest.custom_docker_image else official_image_tensorboard(manifest.framework_version),
        requirements="requirements.txt" in files,
        requirements_file=Path(manifest.pip_requirements_file).name if manifest.pip_requirements_file else None,
        ca_bundle=CA_NAME if ca_bundle else None,
        quote=shlex.quote,
    )
    digest = hashlib.sha256()
    digest.update(dockerfile.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    digest.update((base_image_id or base).encode())
    content_hash = digest.hexdigest()
    labels = {
        f"{LABEL}.name": manifest.name,
        f"{LABEL}.version": runner.__version__,
        f"{LABEL}.framework-version": manifest.framework_version or "",
        f"{LABEL}.content-hash": content_hash,
        f"{LABEL}.base-image": base,
    }
    tag = f"tftrain/{manifest.name.lower()}:{content_hash[:16]}"
    return ImageSpec(manifest.name, base, dockerfile, files, tag, labels, ca_bundle)
