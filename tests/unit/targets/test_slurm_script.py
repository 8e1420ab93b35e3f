"""The Slurm job of a plan, without a cluster: what the batch script asks for and how it starts the
tasks, tasks.json (no secret in it), TF_CONFIG from the allocation (rank.py), compute.slurm's checks."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from slurming import slurm_model

from runner.plan.model import LaunchPlan, Role, SuccessPolicy, TaskSpec
from runner.targets.slurm import rank
from runner.targets.slurm.script import (
    Launch,
    LaunchMode,
    batch_request,
    batch_script,
    launch_for,
    shared_env,
    slurm_components,
    task_log,
    tasks_document,
)

manifest = slurm_model


def test_a_single_gpu_job_with_a_time_limit():
    request = batch_request(manifest(use_gpu=True, max_run_duration_seconds=600), "m-3", "tftrain:abc", 30)
    assert (request.nodes, request.ntasks, request.ntasks_per_node, request.gpus_per_node) == (1, 1, 1, 1)
    assert request.time_minutes == 12  # 600 s + 30 s grace + a minute, rounded up
    assert request.job_name == "tftrain-m-3" and request.signal_seconds == 30
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/runs/m-3/launch", "/runs/m-3/workdir", "m-3")
    for line in (
        "#SBATCH --job-name=tftrain-m-3",
        "#SBATCH --comment=tftrain:abc",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --time=12",
        "#SBATCH --signal=TERM@30",
        "#SBATCH --no-requeue",
        "#SBATCH --output=/runs/m-3/launch/batch.log",
        "#SBATCH --chdir=/runs/m-3/workdir",
        "\nsrun x\n",
    ):
        assert line in script, script
    assert "--partition" not in script


def test_no_gpu_no_limit_no_lines_for_them():
    request = batch_request(manifest(), "m-1", "c", 10)
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/l", "/w", "m-1")
    assert "--gres" not in script and "--time" not in script
    assert "--gres=gpu" not in " ".join(request.options()) and "--time" not in " ".join(request.options())


def test_placement_and_extra_args_are_lines_of_their_own():
    slurm = {
        "partition": "gpu",
        "account": "ml",
        "qos": "normal",
        "constraint": "a100&ib",
        "extra_args": ["--exclusive", "--mem=8G"],
    }
    request = batch_request(manifest(compute={"target": "slurm", "slurm": slurm}), "m-1", "c", 10)
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/l", "/w", "m-1")
    assert (
        "#SBATCH --partition=gpu\n#SBATCH --account=ml\n#SBATCH --qos=normal\n#SBATCH --constraint=a100&ib\n" in script
    )
    assert "#SBATCH --exclusive\n#SBATCH --mem=8G\n" in script
    assert request.options()[-6:] == [
        "--partition=gpu",
        "--account=ml",
        "--qos=normal",
        "--constraint=a100&ib",
        "--exclusive",
        "--mem=8G",
    ]


def test_tasks_over_the_nodes():
    ps = manifest(
        node_count=2,
        distributed_training={"backend": "parameter_server", "worker_count": 2, "parameter_server_count": 1},
        use_gpu=True,
    )
    request = batch_request(ps, "m-1", "c", 10)
    assert (request.nodes, request.ntasks, request.ntasks_per_node, request.gpus_per_node) == (2, 4, 2, 2)
    uneven = manifest(
        node_count=2,
        distributed_training={"backend": "parameter_server", "worker_count": 1, "parameter_server_count": 1},
    )
    request = batch_request(uneven, "m-1", "c", 10)
    assert (request.ntasks, request.ntasks_per_node) == (3, 0)  # Slurm places three tasks on two nodes itself
    assert not any(option.startswith("--ntasks-per-node") for option in request.options())
    mpi = manifest(node_count=2, distributed_training={"backend": "mpi", "process_count_per_node": 2})
    assert (batch_request(mpi, "m-1", "c", 10).ntasks, batch_request(mpi, "m-1", "c", 10).ntasks_per_node) == (4, 2)


def plan_of(tasks, driver=None) -> LaunchPlan:
    return LaunchPlan(
        "x", "slurm", tuple(tasks), driver=driver, success_policy=SuccessPolicy.CHIEF, secret_names=frozenset({"TOKEN"})
    )


def task(role: Role, index: int, rank_: int, **env) -> TaskSpec:
    base = {
        "TOKEN": "s3cret",
        "TFTRAIN_RUN_ID": "m-1",
        "TF_CONFIG": "{}",
        "TFTRAIN_RANK": str(rank_),
        "TFTRAIN_METRICS_FILE": f"/m/{rank_}.jsonl",
    }
    return TaskSpec(role, index, rank_, "localhost", ("/py", "train.py"), {**base, **env}, "/w")


def test_tasks_json_holds_each_tasks_own_variables_and_no_secret():
    plan = plan_of(
        [task(Role.CHIEF, 0, 0, TF_CONFIG=json.dumps({"cluster": {"chief": ["a"], "ps": ["b"]}})), task(Role.PS, 0, 1)]
    )
    document = json.loads(tasks_document(plan, "/l"))
    assert document["tf_config"] is True and document["cluster_roles"] == ["chief", "ps"]
    assert [t["env"] for t in document["tasks"]] == [
        {"TFTRAIN_METRICS_FILE": "/m/0.jsonl"},
        {"TFTRAIN_METRICS_FILE": "/m/1.jsonl"},
    ]
    assert "s3cret" not in tasks_document(plan, "/l")
    assert shared_env(plan) == {"TOKEN": "s3cret", "TFTRAIN_RUN_ID": "m-1"}  # through sbatch's environment


def test_the_launch_line_per_backend():
    one = plan_of([task(Role.MAIN, 0, 0)])
    assert launch_for(one, manifest(), "/l d", "/py", pmix=False).line.startswith(
        "srun --kill-on-bad-exit=0 --open-mode=append '--output=/l d/rank-%t.log' /py "
    )
    mpi_manifest = manifest(distributed_training={"backend": "mpi", "mpi_args": ["-mca", "x", "y"]})
    ranks = plan_of([task(Role.RANK, 0, 0), task(Role.RANK, 1, 1)], driver=task(Role.LAUNCHER, 0, -1))
    assert launch_for(ranks, mpi_manifest, "/l", "/py", pmix=True).mode == LaunchMode.SRUN_PMIX
    assert (
        "srun --mpi=pmix --kill-on-bad-exit=1 --open-mode=append"
        in launch_for(ranks, mpi_manifest, "/l", "/py", pmix=True).line
    )
    by_mpirun = launch_for(ranks, mpi_manifest, "/l", "/py", pmix=False)
    assert by_mpirun.mode == LaunchMode.MPIRUN and by_mpirun.line.startswith(
        "mpirun --allow-run-as-root --tag-output -np 2 "
    )
    assert by_mpirun.line.endswith("-mca x y /py train.py")


def test_tf_config_from_the_allocation():
    roles = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]
    addresses = ["10.0.0.1:2001", "10.0.0.1:2002", "10.0.0.2:2001", "10.0.0.2:2002", "10.0.0.2:2003"]
    config = json.loads(rank.tf_config(addresses, roles, ["chief", "ps", "worker"], 2))
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"] == {
        "chief": ["10.0.0.1:2001"],
        "ps": ["10.0.0.2:2002"],
        "worker": ["10.0.0.1:2002", "10.0.0.2:2001"],
    }
    assert "evaluator" not in config["cluster"]


def test_a_ranks_environment_has_its_rank_and_metrics_file(monkeypatch):
    monkeypatch.setenv("TFTRAIN_METRICS_FILE", "/m/{rank}.jsonl")  # MPI: shared, through Slurm's environment
    job = {"dir": "/l", "tf_config": False, "cluster_roles": [], "tasks": [{"env": {}}, {"env": {}}]}
    env = rank.task_env(job, 1)
    assert env["TFTRAIN_RANK"] == "1" and env["TFTRAIN_METRICS_FILE"] == "/m/1.jsonl" and "TF_CONFIG" not in env


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("--nodes=4", "sets --nodes"),
        ("-N4", "sets --nodes"),
        ("--time=5", "sets --time"),
        ("--gres=gpu:8", "sets --gres"),
        ("--job-name=x", "sets --job-name"),
        ("-o/tmp/x", "sets --output"),
        ("--exclusive\n#SBATCH --nodes=9", "line break"),
        ("--x\0", "NUL"),
        ("exclusive", "not an sbatch option"),
        ("--", "not an sbatch option"),
        ("--mem 8G", "holds a space"),
        ("--comment=tftrain:other", "sets --comment"),
        ("--export=NONE", "sets --export"),
        ("--array=1-9", "sets --array"),
        # getopt takes an unambiguous prefix of a long name, and a cluster of short flags
        ("--nod=4", "sets --nodes"),
        ("--exp=NONE", "sets --export"),
        ("-vN4", "sets --nodes"),
        ("-HQt5", "sets --time"),
    ],
)
def test_extra_args_that_are_refused(item, words):
    with pytest.raises(ValidationError) as raised:
        manifest(compute={"target": "slurm", "slurm": {"extra_args": [item]}})
    assert words in str(raised.value) and "extra_args" in str(raised.value)


def test_extra_args_that_are_sbatch_s_own_business_pass():
    items = ["--exclusive", "--mem=8G", "--mem-per-cpu=2G", "--hold", "-H", "-wnode1", "--begin=now+60", "-v"]
    assert manifest(compute={"target": "slurm", "slurm": {"extra_args": items}}).compute.slurm.extra_args == items


def test_slurm_names_are_one_word_each():
    for key, value in (
        ("partition", "gpu\n#SBATCH --nodes=9"),
        ("account", "a b"),
        ("qos", "-x"),
        ("constraint", "a;b"),
        ("shared_dir", "rel"),
    ):
        with pytest.raises(ValidationError):
            manifest(compute={"target": "slurm", "slurm": {key: value}})
    assert manifest(compute={"target": "slurm", "slurm": {"extra_args": ["--exclusive", "--mem=8G", "--nodelist=n1"]}})


def test_plan_prints_the_batch_script_without_a_cluster(project, cli, home, monkeypatch):
    """`tftrain plan` asks Slurm nothing (no sbatch --test-only): it works off the login node."""
    monkeypatch.setenv("PATH", "/nonexistent")
    text = (
        "node_count: 2\ndistributed_training:\n  backend: multi_worker_mirrored\n  worker_count: 2\ncompute:\n  target:"
        " slurm\n  slurm:\n    partition: gpu\n"
    )
    path = project(script="raise SystemExit('must not run')\n", manifest=text)
    result = cli("plan", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "target:      slurm" in result.stdout and "batch script (sbatch):" in result.stdout
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --partition=gpu",
        "rank.py",
    ):
        assert line in result.stdout, result.stdout
    written = home.parent / "plan"
    assert cli("plan", "-f", str(path), "--output-dir", str(written)).returncode == 0
    assert "#SBATCH --partition=gpu" in (written / "slurm.sh").read_text()
    assert json.loads((written / "tasks.json").read_text())["tf_config"] is True
    assert not (home / "runs").exists()
    # a Slurm job may be stopped and resumed: the start-up layer holds a SIGTERM while Keras saves
    assert "TFTRAIN_SAVE_BEFORE_STOP=1" in result.stdout and "runner/compat/startup" in result.stdout
    local = cli("plan", "-f", str(project(script="pass\n", manifest="compute:\n  target: local\n")))
    assert "TFTRAIN_SAVE_BEFORE_STOP" not in local.stdout and "runner/compat/startup" not in local.stdout


def test_hostile_words_stay_words_in_the_batch_script():
    """The launch line is the one line a shell reads: script parameters and paths come back intact."""
    import shlex

    hostile = "$(touch /tmp/pwned); `id` && echo '\"x\nnext line"
    mpi_manifest = manifest(distributed_training={"backend": "mpi"})
    argv = ("/py", "train.py", "--name", hostile)
    ranks = plan_of([TaskSpec(Role.RANK, 0, 0, "localhost", argv, {}, "/w")], driver=task(Role.LAUNCHER, 0, -1))
    launch = launch_for(ranks, mpi_manifest, "/runs/a;b", "/py", pmix=False)
    assert shlex.split(launch.line)[-4:] == list(argv)
    script = batch_script(batch_request(mpi_manifest, "m-1", "c", 10), launch, "/runs/a;b", "/w", "m-1")
    body = script.split("set -u\n", 1)[1]
    assert "'/runs/a;b'/exit" in body  # the exit file's directory, quoted
    assert "\nnext line" not in body.replace(shlex.quote(hostile), "")  # the newline lives inside one quoted word


def test_the_nodes_get_the_cached_virtualenv_even_where_tftrains_interpreter_would_do(project, home, env_cache):
    """Locally a manifest that asks for nothing runs in tftrain's own interpreter; the nodes may not
    have it, so on Slurm it is the default release's curated virtualenv in the (shared) cache."""
    from runner.environments.virtualenv import env_spec
    from runner.frameworks.releases import DEFAULT_VERSION
    from runner.manifest import load_manifest
    from runner.targets.slurm.target import SlurmTarget

    for text, version in (
        ("", DEFAULT_VERSION),
        (f"framework_version: '{DEFAULT_VERSION}'\n", DEFAULT_VERSION),
        ("framework_version: '2.21'\n", "2.21"),
    ):
        loaded = load_manifest(project(manifest=text + "model: {gate: 'off'}\ncompute:\n  target: slurm\n"))
        spec = SlurmTarget().check(loaded, dry_run=True).local.spec
        assert spec.key is not None and spec.requirements[0] == f"tensorflow-cpu=={version}.*", text
        assert spec.python_path() == str(
            env_cache.resolve() / "envs" / spec.key / "bin" / "python"
        )  # under the cache dir, not sys.executable
        curated = load_manifest(project(manifest=f"framework_version: '{version}'\n"))
        assert spec.key == env_spec(curated.manifest, curated.source_dir, own_interpreter=False).key
    assert env_spec(loaded.manifest, loaded.source_dir).key is not None  # 2.21: a virtualenv on any target
    mine = load_manifest(project(manifest="user_managed: true\ncompute:\n  target: slurm\n"))
    assert SlurmTarget().check(mine, dry_run=True).local.spec.key is None  # user_managed: the interpreter as it is


def heterogeneous(**slurm):
    return manifest(
        use_gpu=True,
        node_count=2,
        distributed_training={"backend": "parameter_server", "worker_count": 2, "parameter_server_count": 1},
        compute={"target": "slurm", "slurm": {"heterogeneous": True, "partition": "gpu", **slurm}},
    )


def test_a_heterogeneous_job_puts_chief_and_servers_apart_from_the_workers():
    loaded = heterogeneous(ps_partition="cpu", qos="small")
    request = batch_request(loaded, "m-1", "tftrain:abc", 30)
    first, second = request.components
    assert (first.nodes, first.ntasks, first.gpus_per_node) == (1, 2, 0)  # the chief and one parameter server
    assert (second.nodes, second.ntasks, second.gpus_per_node) == (1, 2, 2)  # two workers, a GPU each
    options = request.options()
    cut = options.index(":")
    assert "--partition=cpu" in options[:cut] and "--gres=gpu:2" not in options[:cut]
    assert "--partition=gpu" in options[cut:] and "--gres=gpu:2" in options[cut:]
    assert "--qos=small" in options[:cut] and "--qos=small" in options[cut:]
    script = batch_script(request, Launch(LaunchMode.SRUN, "srun x"), "/j", "/w", "m-1")
    header = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    cut = header.index("#SBATCH hetjob")
    assert header.count("#SBATCH hetjob") == 1 and "#SBATCH --partition=gpu" in header[cut:]
    assert "#SBATCH --partition=cpu" in header[:cut] and "#SBATCH --gres=gpu:2" in header[cut:]
    assert header.index("#SBATCH --no-requeue") < header.index("#SBATCH hetjob")  # job-wide lines: the first component
    from runner.targets.slurm.gpus import gpus_allocated

    assert gpus_allocated(request) == 2
    components = slurm_components(loaded)
    assert components == [[0, 3], [1, 2]]  # the chief and the server (plan ranks 0 and 3), then the workers
    assert rank.rank_of({"components": components}, 1, 0) == 3 and rank.rank_of({}, 1, None) == 1
    assert rank.rank_of({"components": components}, 1, 1) == 2
    assert [task_log(r, components) for r in range(4)] == [
        "rank-0.0.log",
        "rank-1.0.log",
        "rank-1.1.log",
        "rank-0.1.log",
    ]
    assert task_log(3, None) == "rank-3.log"


def test_a_heterogeneous_jobs_tasks_start_in_a_step_per_component():
    loaded = heterogeneous()
    cluster = json.dumps({"cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"], "ps": ["d:1"]}})
    roles = ((Role.CHIEF, 0), (Role.WORKER, 0), (Role.WORKER, 1), (Role.PS, 0))
    plan = plan_of([task(role, index, rank_, TF_CONFIG=cluster) for rank_, (role, index) in enumerate(roles)])
    launch = launch_for(plan, loaded, "/j", "python", pmix=False)
    first, second = launch.line.removeprefix("{ ").removesuffix("; wait; }").split(" & ")
    assert first.startswith("srun --het-group=0 ") and first.endswith(" /j 0") and "--output=/j/rank-0.%t.log" in first
    assert (
        second.startswith("srun --het-group=1 ") and second.endswith(" /j 1") and "--output=/j/rank-1.%t.log" in second
    )
    document = json.loads(tasks_document(plan, "/j", slurm_components(loaded)))
    assert document["components"] == [[0, 3], [1, 2]]
    first = batch_request(loaded, "m-1", "c", 30).components[0]
    assert "--partition=gpu" in first.options()  # no ps_partition: the job's partition for both


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"slurm": {"heterogeneous": True}}, "only a parameter-server job"),
        ({"slurm": {"ps_partition": "cpu"}}, "is only for a heterogeneous job"),
    ],
)
def test_heterogeneous_settings_that_cannot_work(fields, says):
    from runner.manifest.slurm import check_slurm

    problems = check_slurm(manifest(compute={"target": "slurm", **fields}))
    assert len(problems) == 1 and says in problems[0][1]
    timed = heterogeneous(time_limit=5)
    timed = timed.model_copy(update={"max_run_duration_seconds": 3600})
    assert "not requeued at a time limit" in check_slurm(timed)[0][1]


def test_no_module_beside_rank_py_shadows_the_standard_library():
    """rank.py runs as a script: its folder comes first on sys.path, so a module there named like one
    of the standard library's (array.py did) is what `import socket` imports inside every task."""
    import sys
    from pathlib import Path

    folder = Path(rank.__file__).parent
    assert not {path.stem for path in folder.glob("*.py")} & set(sys.stdlib_module_names)


def test_a_fresh_slurm_target_knows_nothing_of_a_run_yet():
    """Its run's parts are set by runtime and finalize; before them each is None, never missing."""
    from runner.targets.slurm.target import SlurmTarget

    target = SlurmTarget()
    assert (target.paths, target.state, target.launch, target.request, target.components) == (None,) * 5
    assert target.settings is None
