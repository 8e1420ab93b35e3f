"""The Python environment a local run trains in (and the gate's, an export's, a server's).

No packages listed (and the framework_version, if any, already installed): the current
interpreter. Otherwise a virtualenv in the cache, named by the hash of everything that goes
into it, built once under a lock and reused by every later run with the same hash.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from runner.environments.shared_files import share_files
from runner.errors import PreparingError, UnsupportedError
from runner.frameworks.curated import constraints_for, requirement_names
from runner.frameworks.releases import DEFAULT_VERSION, HOROVOD, requirement, tf_keras_requirement
from runner.manifest.legacy_keras import keras_choice, may_choose_legacy
from runner.manifest.model import Manifest, MpiTraining
from runner.manifest.sourcepaths import read_source_text
from runner.paths import cache_dir
from runner.telemetry.logger import Logger
from runner.telemetry.tee import Tee

COMPLETE = ".tftrain-complete"
CONSTRAINTS = "tftrain-constraints.txt"  # in the virtualenv's directory: what it was built with
FRAMEWORK_PACKAGES = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel")


class PipStep(NamedTuple):
    """A pip install of its own, after the requirements (Horovod builds against the installed TF)."""

    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


HOROVOD_BUILD_ENV = (
    ("HOROVOD_WITH_TENSORFLOW", "1"),
    ("HOROVOD_WITH_MPI", "1"),
    ("HOROVOD_WITH_GLOO", "1"),
    ("HOROVOD_WITHOUT_PYTORCH", "1"),
    ("HOROVOD_WITHOUT_MXNET", "1"),
)


class EnvSpec(NamedTuple):
    """What the environment must hold; `key` is None when the current interpreter will do."""

    python_version: str
    requirements: tuple[str, ...]
    requirements_file: str | None
    requirements_text: str | None
    key: str | None
    steps: tuple[PipStep, ...] = ()
    constraints: str | None = None  # the tested set's pins (runner/frameworks/constraints), for every pip install

    def python_path(self) -> str:
        return sys.executable if self.key is None else str(cache_dir() / "envs" / self.key / "bin" / "python")

    def describe(self) -> str:
        if self.key is None:
            return f"current interpreter ({sys.executable}, Python {self.python_version})"
        packages = [*self.requirements, *(step.args[-1] for step in self.steps)]
        tensorflow = next(
            (line.split("==")[1] for line in (self.constraints or "").splitlines() if line.startswith("tensorflow==")),
            None,
        )
        pinned = f"; TensorFlow {tensorflow}'s tested set" if tensorflow else ""
        return f"cached virtualenv {self.key[:12]} ({', '.join(packages) or 'no packages'}{pinned})"


class PythonEnv(NamedTuple):
    python: str
    key: str | None
    reused: bool

    @property
    def is_venv(self) -> bool:
        return self.key is not None


def installed_framework_version() -> str | None:
    from importlib import metadata  # here: its import costs more than starting the script takes

    for name in FRAMEWORK_PACKAGES:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def cpu_only_framework() -> bool:
    """Whether tftrain's interpreter holds TensorFlow's CPU-only build (tensorflow-cpu), which no GPU runs."""
    return _installed("tensorflow-cpu") and not _installed("tensorflow")


def packages_in(env: PythonEnv) -> dict[str, str]:
    """name → version of every distribution in the environment (for manifest.lock.yml)."""
    from importlib import metadata

    paths = (
        [str(site) for site in Path(env.python).parent.parent.glob("lib/python*/site-packages")]
        if env.is_venv
        else None
    )
    found = metadata.distributions(path=paths) if paths else metadata.distributions()
    return dict(sorted(pair for pair in map(_name_and_version, found) if pair[0]))


def _name_and_version(dist) -> tuple[str | None, str | None]:
    """Name and Version from the metadata's header alone: `dist.metadata` parses the whole file,
    long description included, which for a hundred packages costs more than starting the script."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
    return found.get("Name"), found.get("Version")


def framework_version_of(packages: dict[str, str]) -> str | None:
    """The TensorFlow version among an environment's packages (see packages_in)."""
    found = {name.lower().replace("_", "-"): version for name, version in packages.items()}
    return next((found[name] for name in FRAMEWORK_PACKAGES if name in found), None)


def framework_requirement(manifest: Manifest) -> str | None:
    if any(names_framework(req) for req in manifest.pip_packages):
        return None
    return requirement(manifest.use_gpu, manifest.framework_version)


def framework_packages(
    manifest: Manifest, user_lines: list[str] | tuple[str, ...]
) -> tuple[tuple[str, ...], str | None]:
    """What tftrain installs for TensorFlow, and the constraints it installs everything with:
    framework_version's requirement and tensorboard (TensorFlow 2.21 no longer brings it), with the
    release's tested set less what the user lists. Nothing where the user lists TensorFlow."""
    framework = framework_requirement(manifest)
    if framework is None:
        return (), None
    tensorboard = () if "tensorboard" in requirement_names(user_lines) else ("tensorboard",)
    return (framework, *tensorboard), constraints_for(manifest.framework_version, user_lines)


def names_framework(requirement: str) -> bool:
    name = requirement.split(";")[0].split("[")[0]
    for sep in "=<>!~ ":
        name = name.split(sep)[0]
    return name.strip().lower().replace("_", "-") in FRAMEWORK_PACKAGES


def env_spec(manifest: Manifest, source_dir: Path, own_interpreter: bool = True) -> EnvSpec:
    """`own_interpreter`: False where the tasks cannot use tftrain's (Slurm's nodes see only the
    shared filesystem): always a cached virtualenv, of framework_version or the default release."""
    if manifest.conda_packages or manifest.conda_dependencies_file:
        key = "conda_packages" if manifest.conda_packages else "conda_dependencies_file"
        raise UnsupportedError(
            f"{key}: the local target has no conda; use use_docker: true with a conda base image, "
            "or list the packages under pip_packages"
        )
    version = ".".join(map(str, sys.version_info[:3]))
    requirements_text = None
    if manifest.pip_requirements_file:
        requirements_text = read_source_text(source_dir, manifest.pip_requirements_file, "pip_requirements_file")
    horovod = isinstance(manifest.distributed_training, MpiTraining)
    wanted = manifest.framework_version or (DEFAULT_VERSION if horovod or not own_interpreter else None)
    installed = (
        installed_framework_version() if wanted is not None or manifest.use_gpu or may_choose_legacy(manifest) else None
    )
    # use_gpu on an interpreter whose TensorFlow is the CPU-only build would train on the CPU, unsaid
    gpu_ok = not manifest.use_gpu or not cpu_only_framework()
    framework_ok = wanted is None or _matches(installed, wanted)
    horovod_ok = not horovod or _installed("horovod")
    keras = keras_choice(
        manifest, wanted or installed
    )  # tf-keras where Keras 3 cannot train (runner/manifest/legacy_keras.py)
    keras_ok = not keras.legacy or _matches(_version_of("tf-keras"), _release(wanted or installed))
    if (
        own_interpreter
        and not manifest.pip_packages
        and requirements_text is None
        and framework_ok
        and gpu_ok
        and horovod_ok
        and keras_ok
    ):
        return EnvSpec(version, (), None, None, None)
    if (keras.legacy or not gpu_ok) and wanted is None:  # its release, with tf-keras or TensorFlow's GPU build
        wanted = _release(installed)
    user_lines = [*manifest.pip_packages, *(requirements_text or "").splitlines()]
    framework, constraints = framework_packages(manifest.model_copy(update={"framework_version": wanted}), user_lines)
    requirements = (*framework, *manifest.pip_packages)
    steps: tuple[PipStep, ...] = ()
    if horovod:
        requirements += ("setuptools", "wheel")
        steps = horovod_steps(wanted)
    elif keras.legacy:
        steps = tf_keras_steps(wanted)
    key = _key(version, requirements, requirements_text, steps, constraints)
    return EnvSpec(version, requirements, manifest.pip_requirements_file, requirements_text, key, steps, constraints)


def current_interpreter() -> EnvSpec:
    """tftrain's own interpreter as it is: nothing to build (a user-managed local run's spec)."""
    return EnvSpec(".".join(map(str, sys.version_info[:3])), (), None, None, None)


def requirements_spec(requirements: tuple[str, ...], constraints: str | None = None) -> EnvSpec:
    """A cached virtualenv of these packages alone (the gate's export and serving environments)."""
    version = ".".join(map(str, sys.version_info[:3]))
    return EnvSpec(
        version, requirements, None, None, _key(version, requirements, None, (), constraints), (), constraints
    )


def _key(python: str, requirements, requirements_text: str | None, steps, constraints: str | None) -> str:
    """Everything that goes into the environment: a refreshed tested set builds a new one."""
    source = {
        "python": python,
        "requirements": requirements,
        "file": requirements_text,
        "steps": [step._asdict() for step in steps],
    }
    if constraints is not None:  # environments without a set keep the keys they had
        source["constraints"] = constraints
    return hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()


def horovod_steps(framework_version: str) -> tuple[PipStep, ...]:
    """Horovod built against the environment's TensorFlow; with Keras 3 (TF ≥ 2.16), tf-keras for
    Horovod's Keras API (ranks get TF_USE_LEGACY_KERAS=1)."""
    steps = list(tf_keras_steps(framework_version)) if tf_keras_requirement(framework_version) else []
    steps.append(PipStep(("--no-build-isolation", "--no-cache-dir", HOROVOD), HOROVOD_BUILD_ENV))
    return tuple(steps)


def tf_keras_steps(framework_version: str) -> tuple[PipStep, ...]:
    """tf-keras of the release, without its dependencies (they are the full `tensorflow`, the CUDA build)."""
    return (PipStep(("--no-deps", tf_keras_requirement(framework_version) or "tf-keras")),)


def _installed(name: str) -> bool:
    return _version_of(name) is not None


def _version_of(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _release(version: str | None) -> str:
    """major.minor of a TensorFlow version (the default release's when there is none)."""
    return ".".join((version or DEFAULT_VERSION).split(".")[:2])


def _matches(installed: str | None, wanted: str) -> bool:
    return installed is not None and (installed == wanted or installed.startswith(wanted + "."))


def prepare_env(spec: EnvSpec, source_dir: Path, logger: Logger, log_path: Path, console: bool = True) -> PythonEnv:
    """The environment, built once under a lock; `console`: pip's output on the console too (a
    training's environment), else only in the log (the gate's and the server's, a line says where)."""
    if spec.key is None:
        return PythonEnv(sys.executable, None, True)
    root = cache_dir() / "envs"
    root.mkdir(parents=True, exist_ok=True)
    target = root / spec.key
    python = spec.python_path()
    if (target / COMPLETE).exists():
        return PythonEnv(python, spec.key, True)
    with (root / f"{spec.key}.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info(f"waiting for another tftrain that is building environment {spec.key[:12]}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / COMPLETE).exists():
            return PythonEnv(python, spec.key, True)
        shutil.rmtree(target, ignore_errors=True)  # a build that died half-way
        try:
            _build(spec, target, source_dir, logger, log_path, console)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)  # its log says what failed; its GBs are not kept
            raise
        _share_files(spec.key, target, logger)
        (target / COMPLETE).write_text(json.dumps({"requirements": spec.requirements}) + "\n")
    return PythonEnv(python, spec.key, False)


def _share_files(key: str, target: Path, logger: Logger) -> None:
    shared = share_files(target, cache_dir())
    if shared.linked:
        logger.info(
            f"environment {key[:12]}: {shared.linked} files ({shared.saved / 2**20:.0f} MB) are"
            " the same bytes as another cached environment's and are kept once"
        )


def _build(spec: EnvSpec, target: Path, source_dir: Path, logger: Logger, log_path: Path, console: bool) -> None:
    logger.info(f"building {spec.describe()} (log: {log_path})")
    _call([sys.executable, "-m", "venv", str(target)], "creating the virtualenv", logger, log_path, console=console)
    pip = [
        str(target / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
    ]
    if spec.constraints:
        (target / CONSTRAINTS).write_text(spec.constraints)
        pip += ["-c", str(target / CONSTRAINTS)]
    args = list(spec.requirements)
    if spec.requirements_file:
        args += ["-r", str(source_dir / spec.requirements_file)]
    if args:
        _call(pip + args, "pip install", logger, log_path, console=console)
    for step in spec.steps:
        _call(pip + list(step.args), f"pip install {step.args[-1]}", logger, log_path, dict(step.env), console)


def _call(
    argv: list[str], what: str, logger: Logger, log_path: Path, env: dict[str, str] | None = None, console: bool = True
) -> None:
    with Tee(log_path, logger, f"$ {' '.join(argv)}\n", console) as tee:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env={**os.environ, **(env or {})},
        )
        assert process.stdout is not None
        for line in process.stdout:
            tee.write(line)
        code = process.wait()
    if code != 0:
        errors = [line for line in tee.tail if line.startswith("ERROR")] or list(tee.tail)[-1:] or ["no output"]
        raise PreparingError(f"{what} failed (exit {code}): {errors[-1]} (full output: {log_path})")
