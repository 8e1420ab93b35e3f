"""Which Keras a run's tasks import: Keras 2 (tf-keras, `TF_USE_LEGACY_KERAS=1`) for distributed
training where TensorFlow ships Keras 3 (≥ 2.16), because Keras 3 cannot train there:

- MultiWorkerMirroredStrategy: Keras 3's `fit` fails with "Attempt to convert a value (PerReplica…)"
  (keras-team/keras#20585), so TensorFlow's own tutorial does not run;
- ParameterServerStrategy: Keras 3 does not support it at all (keras-team/keras#18624);
- Horovod (backend: mpi): its Keras API needs Keras 2.

A manifest opts out with `environment_variables: {TF_USE_LEGACY_KERAS: "0"}` (its own value always
wins, and one that turns it on gets tf-keras installed for any backend). Every target reads the
same choice: the environment installs tf-keras of TensorFlow's release, every task gets the variable.
"""

from __future__ import annotations

from typing import NamedTuple

from runner.frameworks.releases import tf_keras_requirement, uses_keras3
from runner.manifest.fields import env_text
from runner.manifest.model import Manifest

VARIABLE = "TF_USE_LEGACY_KERAS"
TRUE = ("1", "true", "True")  # what TensorFlow's lazy loader reads as on (tensorflow/python/util/lazy_loader.py)
REASONS = {
    "multi_worker_mirrored": "Keras 3's fit cannot run under MultiWorkerMirroredStrategy (keras-team/keras#20585)",
    "parameter_server": "Keras 3 does not support ParameterServerStrategy (keras-team/keras#18624)",
    "mpi": "Horovod's Keras API needs Keras 2",
}
OPT_OUT = f'environment_variables: {{{VARIABLE}: "0"}}'
# Keras 3's fit under MultiWorkerMirroredStrategy, as the script's traceback ends
PER_REPLICA = "Attempt to convert a value (PerReplica"


class KerasChoice(NamedTuple):
    legacy: bool  # the tasks run with TF_USE_LEGACY_KERAS=1 and tf-keras installed
    requirement: str | None  # `tf-keras==2.18.*` when legacy, else None
    reason: str | None  # why, when legacy: the backend's, or the manifest's own variable
    opted_out: bool  # the manifest turned off what its backend would get

    @property
    def note(self) -> str | None:
        """What the plan and the run's console say (after `keras: `), when legacy."""
        if not self.legacy:
            return None
        return f"tf-keras ({self.requirement}, {VARIABLE}=1 for every task): {self.reason}"


def keras_choice(manifest: Manifest, version: str | None = None) -> KerasChoice:
    """The choice for `manifest` on TensorFlow `version` (default: its framework_version, else the default release)."""
    version = version or manifest.framework_version
    training = manifest.distributed_training
    backend = training.backend if training is not None else None
    wanted = manifest.environment_variables.get(VARIABLE)
    by_backend = backend in REASONS
    if not uses_keras3(version):
        return KerasChoice(False, None, None, False)
    if wanted is not None and env_text(wanted) not in TRUE:
        return KerasChoice(False, None, None, by_backend)
    if wanted is not None:
        reason = f"environment_variables.{VARIABLE} asks for it"
    elif by_backend:
        reason = f"{REASONS[backend]}; to train {backend} with Keras 3 instead, set {OPT_OUT}"
    else:
        return KerasChoice(False, None, None, False)
    return KerasChoice(True, tf_keras_requirement(version), reason, False)


def may_choose_legacy(manifest: Manifest) -> bool:
    """Whether the choice can be tf-keras on some TensorFlow (the installed version is worth reading)."""
    training = manifest.distributed_training
    return VARIABLE in manifest.environment_variables or (training is not None and training.backend in REASONS)


def legacy_env(manifest: Manifest, env: dict[str, str]) -> dict[str, str]:
    """`env` with TF_USE_LEGACY_KERAS=1 where the choice is tf-keras and the manifest did not set it."""
    if VARIABLE in env or not keras_choice(manifest).legacy:
        return env
    return {**env, VARIABLE: "1"}


def opt_out_hint(manifest: Manifest, message: str) -> str | None:
    """The line a script that failed on Keras 3's PerReplica error gets when the manifest opted out."""
    if PER_REPLICA not in message or not keras_choice(manifest).opted_out:
        return None
    return (
        f"Keras 3's fit cannot run under this distribution strategy (keras-team/keras#20585), and "
        f'environment_variables.{VARIABLE} turns tf-keras off: remove it (or set it to "1") and tftrain runs the script'
        " with tf-keras"
    )
