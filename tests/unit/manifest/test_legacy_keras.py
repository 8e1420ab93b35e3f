"""Keras 2 (tf-keras) where Keras 3 cannot train: one choice read by the plan, the environments
(virtualenv, image, a user-managed interpreter) and the failure's hint."""

from __future__ import annotations

import pytest
from builders import RUNTIME

import runner.environments.virtualenv as virtualenv
from runner.environments.images import image_spec
from runner.environments.user_managed import require_tf_keras
from runner.errors import PreparingError
from runner.manifest import load_manifest
from runner.manifest.legacy_keras import VARIABLE, keras_choice, legacy_env, opt_out_hint
from runner.plan.launchers import build_plan
from runner.plan.model import PlanContext

BACKENDS = {
    "single": "",
    "mpi": "distributed_training:\n  backend: mpi\n",
    "multi_worker_mirrored": "distributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 2\n",
    "parameter_server": "distributed_training:\n  backend: parameter_server\n  worker_count: 2\n",
}
PER_REPLICA = (
    "main.py:22: ValueError: Attempt to convert a value (PerReplica:{ 0: <tf.Tensor ...> }) with an unsupported type"
)


def manifest_of(project, backend: str, extra: str = ""):
    return load_manifest(project(manifest="compute:\n  slots_per_node: 4\n" + BACKENDS[backend] + extra))


@pytest.mark.parametrize("backend", ["mpi", "multi_worker_mirrored", "parameter_server"])
@pytest.mark.parametrize("version", ["2.16", "2.18", "2.21.0"])
def test_distributed_backends_train_with_tf_keras_where_keras_3_ships(project, backend, version):
    choice = keras_choice(manifest_of(project, backend).manifest, version)
    assert choice.legacy and not choice.opted_out
    assert choice.requirement == f"tf-keras=={'.'.join(version.split('.')[:2])}.*"
    assert (
        f"{VARIABLE}=1 for every task" in choice.note
        and 'environment_variables: {TF_USE_LEGACY_KERAS: "0"}' in choice.note
    )


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_keras_2_releases_and_single_processes_keep_their_keras(project, backend):
    assert not keras_choice(manifest_of(project, backend).manifest, "2.15").legacy
    if backend == "single":
        assert keras_choice(manifest_of(project, backend).manifest, "2.18") == (False, None, None, False)


@pytest.mark.parametrize("value", ['"0"', "false", '"False"', "0", '"no"'])
def test_a_manifest_opts_out_with_its_own_value(project, value):
    loaded = manifest_of(project, "multi_worker_mirrored", f"environment_variables:\n  {VARIABLE}: {value}\n")
    choice = keras_choice(loaded.manifest, "2.18")
    assert not choice.legacy and choice.opted_out and choice.note is None


@pytest.mark.parametrize("value", ['"1"', "true", '"True"', "1"])
def test_a_manifest_that_asks_for_it_gets_it_on_any_backend(project, value):
    choice = keras_choice(
        manifest_of(project, "single", f"environment_variables:\n  {VARIABLE}: {value}\n").manifest, "2.18"
    )
    assert choice.legacy and choice.requirement == "tf-keras==2.18.*" and "asks for it" in choice.note


def plan_of(project, backend: str, extra: str = ""):
    loaded = manifest_of(project, backend, extra)
    user = {key: str(value) for key, value in loaded.manifest.environment_variables.items()}
    ctx = PlanContext(loaded.manifest, "local", "/venv/bin/python", RUNTIME, {"TFTRAIN_RUN_ID": "r-1", **user}, ())
    return build_plan(ctx)


@pytest.mark.parametrize("backend", ["mpi", "multi_worker_mirrored", "parameter_server"])
def test_every_task_of_a_distributed_plan_gets_the_variable(project, backend):
    plan = plan_of(project, backend)
    specs = [*plan.tasks, *([plan.driver] if plan.driver else [])]
    assert specs and all(spec.env[VARIABLE] == "1" for spec in specs)
    opted = plan_of(project, backend, f"environment_variables:\n  {VARIABLE}: '0'\n")
    assert all(spec.env[VARIABLE] == "0" for spec in [*opted.tasks, *([opted.driver] if opted.driver else [])])
    assert VARIABLE not in plan_of(project, backend, "framework_version: '2.15'\n").tasks[0].env


def test_a_single_process_plan_is_left_as_it_is(project):
    assert VARIABLE not in plan_of(project, "single").tasks[0].env
    assert legacy_env(manifest_of(project, "single").manifest, {"A": "1"}) == {"A": "1"}


def test_a_virtualenv_gets_tf_keras_of_its_release_without_dependencies(project):
    loaded = manifest_of(project, "parameter_server", "framework_version: '2.21'\n")
    spec = virtualenv.env_spec(loaded.manifest, loaded.source_dir)
    assert [step.args for step in spec.steps] == [("--no-deps", "tf-keras==2.21.*")]
    opted = manifest_of(
        project, "parameter_server", f"framework_version: '2.21'\nenvironment_variables:\n  {VARIABLE}: '0'\n"
    )
    assert virtualenv.env_spec(opted.manifest, opted.source_dir).steps == ()
    keras2 = manifest_of(project, "parameter_server", "framework_version: '2.15'\n")
    assert virtualenv.env_spec(keras2.manifest, keras2.source_dir).steps == ()


def test_the_own_interpreter_serves_only_with_tf_keras_of_its_release(project, monkeypatch):
    loaded = manifest_of(project, "multi_worker_mirrored")
    monkeypatch.setattr(virtualenv, "installed_framework_version", lambda: "2.18.1")
    monkeypatch.setattr(virtualenv, "_version_of", lambda name: "2.18.0")
    assert virtualenv.env_spec(loaded.manifest, loaded.source_dir).key is None
    for missing in (None, "2.17.0"):  # absent, or of another release: a virtualenv of the interpreter's release
        monkeypatch.setattr(virtualenv, "_version_of", lambda name, found=missing: found)
        spec = virtualenv.env_spec(loaded.manifest, loaded.source_dir)
        assert spec.key is not None and spec.requirements[0] == "tensorflow-cpu==2.18.*"
        assert [step.args for step in spec.steps] == [("--no-deps", "tf-keras==2.18.*")]
    single = manifest_of(project, "single")
    assert virtualenv.env_spec(single.manifest, single.source_dir).key is None  # tf-keras is not asked for


@pytest.mark.parametrize("backend", ["multi_worker_mirrored", "parameter_server"])
def test_an_image_gets_tf_keras_for_these_backends(project, backend):
    docker = "use_docker: true\ncustom_docker_image: base:1\nframework_version: '2.18'\n"
    dockerfile = image_spec(manifest_of(project, backend, docker)).dockerfile
    assert "--no-deps 'tf-keras==2.18.*'" in dockerfile and "horovod" not in dockerfile
    opted = image_spec(
        manifest_of(project, backend, docker + f"environment_variables:\n  {VARIABLE}: '0'\n")
    ).dockerfile
    assert "tf-keras" not in opted
    assert "tf-keras" not in image_spec(manifest_of(project, "single", docker)).dockerfile


def test_a_user_managed_interpreter_without_tf_keras_is_one_line(project):
    manifest = manifest_of(project, "multi_worker_mirrored").manifest
    require_tf_keras(manifest, "2.18.1", "/opt/py/bin/python", "2.18.0\n")
    require_tf_keras(manifest, "2.15.1", "/opt/py/bin/python", None)  # Keras 2 ships: nothing needed
    for output, has in ((None, "no tf-keras"), ("2.17.0\n", "tf-keras 2.17.0")):
        with pytest.raises(PreparingError) as caught:
            require_tf_keras(manifest, "2.18.1", "/opt/py/bin/python", output)
        text = str(caught.value)
        assert "\n" not in text and text.startswith(f"user_managed: /opt/py/bin/python has TensorFlow 2.18.1 and {has}")
        assert "pip install --no-deps 'tf-keras==2.18.*'" in text and 'TF_USE_LEGACY_KERAS: "0"' in text
    opted = manifest_of(project, "multi_worker_mirrored", f"environment_variables:\n  {VARIABLE}: '0'\n").manifest
    require_tf_keras(opted, "2.18.1", "/opt/py/bin/python", None)


def test_the_per_replica_failure_names_the_option_only_when_it_was_turned_off(project):
    opted = manifest_of(project, "multi_worker_mirrored", f"environment_variables:\n  {VARIABLE}: '0'\n").manifest
    hint = opt_out_hint(opted, PER_REPLICA)
    assert (
        hint and "\n" not in hint and f"environment_variables.{VARIABLE}" in hint and "keras-team/keras#20585" in hint
    )
    assert opt_out_hint(opted, "main.py:3: ValueError: something else") is None
    assert opt_out_hint(manifest_of(project, "multi_worker_mirrored").manifest, PER_REPLICA) is None
    assert (
        opt_out_hint(
            manifest_of(project, "single", f"environment_variables:\n  {VARIABLE}: '0'\n").manifest, PER_REPLICA
        )
        is None
    )


@pytest.mark.parametrize("target", ["local", "docker", "slurm", "kubernetes"])
def test_every_target_plans_the_same_choice(project, cli, target):
    """`tftrain plan --json` on each target: the keras line, and the variable in every task's environment
    (the pool's hosts run these same task specs in their containers, runner/targets/pool/run_on_hosts.py;
    the TFJob's containers get them too: tests/data/golden/tfjob-*.yaml)."""
    import json

    extra = {"docker": "use_docker: true\n", "slurm": "compute:\n  target: slurm\n"}.get(target, "")
    body = BACKENDS["parameter_server"] + "node_count: 2\n" + extra
    if target != "slurm":
        body = "compute:\n  slots_per_node: 4\n" + body
    path = project(manifest=body)
    result = cli("plan", "--json", "-f", str(path), *(["--target", target] if target in ("kubernetes",) else []))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["keras"].startswith("tf-keras (tf-keras==2.18.*, TF_USE_LEGACY_KERAS=1 for every task)")
    assert document["tasks"] and all(task["env"][VARIABLE] == "1" for task in document["tasks"])
