"""`user_managed: true`: the training runs in an interpreter or image tftrain did not build. Before
the run, one short process checks that TensorFlow imports there (`check_interpreter` on this
machine, `check_image_python` in a container of the image on a daemon), so that a missing package
is one line before anything runs rather than a traceback from every rank. A check that passed is
kept (runner/environments/checkcache.py) until the interpreter, what it can import, or the image changes."""

from __future__ import annotations

import subprocess

from runner.environments.checkcache import image_key, interpreter_key, keep, kept
from runner.errors import PreparingError, one_line
from runner.manifest.legacy_keras import keras_choice
from runner.manifest.model import Manifest

# The version is the last line printed: whatever the environment prints on import comes before it
PROBE = "import tensorflow as tf; print(tf.__version__)"
PROBE_TIMEOUT = 300  # a cold import of TensorFlow on a slow disk takes tens of seconds
IMAGE_PYTHON = "python3"
# tf-keras's version without importing it (nor TensorFlow): a few milliseconds
TF_KERAS_PROBE = "from importlib.metadata import version; print(version('tf-keras'))"


def probe_argv(python: str) -> list[str]:
    return [python, "-c", PROBE]


def framework_version(output: str) -> str:
    lines = output.strip().splitlines()
    return lines[-1].strip() if lines else "unknown"


def import_failed(where: str, output: str) -> PreparingError:
    """The error's last line (ModuleNotFoundError: No module named 'tensorflow') names what is missing."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    cause = lines[-1] if lines else "no output"
    return PreparingError(
        f"user_managed: {where} cannot import tensorflow ({cause}); install it there, or set user_managed: false "
        "to let tftrain build the environment"
    )


def check_interpreter(python: str) -> str:
    """TensorFlow's version in `python` (a local interpreter), or a PreparingError naming what is missing."""
    version = kept(interpreter_key(python))
    if version is None:
        version = import_in(python)
        # the key as the import left it: a first import may write site-packages/__pycache__
        keep(interpreter_key(python), version)
    return version


def import_in(python: str) -> str:
    """check_interpreter's import, always run."""
    try:
        done = subprocess.run(
            probe_argv(python),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT,
        )
    except OSError as exc:
        raise PreparingError(f"python: {python} cannot be started ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise PreparingError(f"user_managed: importing tensorflow in {python} took over {PROBE_TIMEOUT} s") from None
    if done.returncode != 0:
        raise import_failed(python, done.stdout)
    return framework_version(done.stdout)


def image_python(manifest: Manifest) -> str:
    """The interpreter of an image used as it is: manifest.python, else the image's python3."""
    return manifest.python or IMAGE_PYTHON


def check_image_python(client, image: str, python: str, image_id: str | None = None) -> str:
    """TensorFlow's version in `image`'s `python`, from a short container with no network; a passed
    check is kept under `image_id` (the daemon's content-addressed id of `image`) when it is given."""
    key = image_key(image_id, python)
    version = kept(key)
    if version is None:
        version = import_in_image(client, image, python)
        keep(key, version)
    return version


def import_in_image(client, image: str, python: str) -> str:
    """check_image_python's container, always run."""
    import docker

    where = f"{python} in image {image}"
    try:
        output = client.containers.run(
            image, probe_argv(python), network_mode="none", remove=True, stdout=True, stderr=True
        )
    except docker.errors.ContainerError as exc:
        raise import_failed(where, (exc.stderr or b"").decode(errors="replace")) from None
    except docker.errors.APIError as exc:  # the daemon could not start it: no such python in the image
        raise PreparingError(f"python: {where} cannot be started ({one_line(str(exc.explanation or exc))})") from None
    return framework_version(output.decode(errors="replace"))


def require_tf_keras(manifest: Manifest, framework: str, where: str, probe_output: str | None) -> None:
    """Where the run's tasks get TF_USE_LEGACY_KERAS=1 (runner/manifest/legacy_keras.py), the
    interpreter must hold tf-keras of its TensorFlow's release: one line before launch, not an
    ImportError from every rank. `probe_output`: what TF_KERAS_PROBE printed there (None: it failed)."""
    keras = keras_choice(manifest, framework)
    if not keras.legacy:
        return
    found = framework_version(probe_output) if probe_output else None
    release = ".".join(framework.split(".")[:2])
    if found is not None and (found == release or found.startswith(release + ".")):
        return
    has = f"tf-keras {found}" if found else "no tf-keras"
    raise PreparingError(
        f"user_managed: {where} has TensorFlow {framework} and {has}, but the tasks run with {keras.note}. "
        f"Install it there: pip install --no-deps '{keras.requirement}'"
    )


def tf_keras_in(python: str) -> str | None:
    """TF_KERAS_PROBE's output in a local interpreter, None when it fails (no tf-keras)."""
    try:
        done = subprocess.run(
            [python, "-c", TF_KERAS_PROBE], capture_output=True, text=True, errors="replace", timeout=PROBE_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def tf_keras_in_image(client, image: str, python: str) -> str | None:
    """TF_KERAS_PROBE's output in a short container of `image` with no network, None when it fails."""
    import docker

    try:
        output = client.containers.run(
            image, [python, "-c", TF_KERAS_PROBE], network_mode="none", remove=True, stdout=True, stderr=False
        )
    except (docker.errors.ContainerError, docker.errors.APIError):
        return None
    return output.decode(errors="replace")
