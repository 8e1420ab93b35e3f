"""The local environment built from a curated set, for the default release and the newest: the
smoke test passes in it (2.21's proves tf.summary works: TensorFlow 2.21 no longer brings
tensorboard) and pip installed the set's versions. The refresh script covers the other releases.

Each environment is ~1.6 GB and a few minutes to build the first time: they live in the lasting
cache (~/.cache/tftrain-test), reused until the set changes."""

from __future__ import annotations

import io
import json
import subprocess

import pytest

from runner.environments.virtualenv import CONSTRAINTS, env_spec, packages_in, prepare_env
from runner.frameworks.curated import constraint_set
from runner.frameworks.releases import DEFAULT_VERSION, FRAMEWORKS
from runner.manifest import load_manifest
from runner.telemetry.logger import Logger

pytestmark = pytest.mark.integration
SMOKE = "runner/environments/smoke.py"
NEWEST = list(FRAMEWORKS)[-1]


@pytest.mark.parametrize("release", sorted({DEFAULT_VERSION, NEWEST}))
def test_the_environment_of_a_release_is_its_tested_set(release, project, lasting_cache, repo, tmp_path):
    # six: a package of the user's, so that 2.18 (the suite's own TensorFlow) gets a virtualenv too
    loaded = load_manifest(project(manifest=f"framework_version: '{release}'\npip_packages: [six]\n"))
    spec = env_spec(loaded.manifest, loaded.source_dir)
    tested = constraint_set(release)
    assert spec.constraints == tested.constraints(frozenset({"six"}))
    env = prepare_env(spec, loaded.source_dir, Logger(io.StringIO()), tmp_path / "prepare.log", console=False)
    assert (lasting_cache / "envs" / spec.key / CONSTRAINTS).read_text() == spec.constraints

    installed = {name.lower().replace("_", "-"): version for name, version in packages_in(env).items()}
    for name in ("tensorflow-cpu", "keras", "numpy", "protobuf", "tensorboard", "ml-dtypes"):
        assert installed[name] == tested.pin(name), name

    done = subprocess.run(
        [env.python, str(repo / SMOKE), str(tmp_path / "smoke")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("smoke: ", 1)[1])
    assert result["tensorflow"] == tested.tensorflow and result["summary"] == "ok"
    assert result["savedmodel_max_difference"] <= 1e-5
