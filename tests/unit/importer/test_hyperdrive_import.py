"""tftrain import azureml, sweeps: HyperDriveConfig (SDK v1) and `type: sweep` jobs (v2) → `sweep:`.

Each sweep section is compared whole, as the manifest loads it and as the YAML reads; what the file
does not state literally is a TODO in the manifest and a line in the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_azureml_import import imported, uncommented

from runner.cli.main import main
from runner.importer.sdk import known_callee
from runner.manifest.fields import InputRef
from runner.manifest.sweep import SweepSpec, SweptManifest

V1_HEAD = (
    "from azureml.core import Experiment, ScriptRunConfig\n"
    "from azureml.train.hyperdrive import *\n"
    "src = ScriptRunConfig('.', 'train.py', arguments=['--lr', 0.1])\n"
)


def v1_sweep(tmp_path: Path, body: str) -> dict:
    """The sweep section imported from a script whose HyperDriveConfig(...) is `body`."""
    script = f"{V1_HEAD}htc = {body}\nExperiment(ws, 'tune').submit(htc)\n"
    tmp_path.mkdir()
    manifest, text, _report = imported(tmp_path, "job.py", "train.py", text=script)
    return yaml.safe_load(text)["sweep"]


def v2_sweep(tmp_path: Path, sweep: str, command: str = "python train.py --lr ${{search_space.lr}}") -> dict:
    job = f"type: sweep\ntrial:\n  code: .\n  command: {command}\n{sweep}"
    tmp_path.mkdir()
    _manifest, text, _report = imported(tmp_path, "job.yml", "train.py", text=job)
    return yaml.safe_load(text)["sweep"]


def imported_text(tmp_path: Path, name: str, text: str) -> tuple[str, str]:
    """The manifest and report of an import whose manifest is left with TODOs to fill in."""
    (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text("print('training')\n")
    assert main(["import", "azureml", str(tmp_path / name), "-o", str(tmp_path / "tftrain.yml")]) == 0
    return (tmp_path / "tftrain.yml").read_text(), (tmp_path / "tftrain-import-report.md").read_text()


def test_v1_tutorial_hyperdrive_becomes_the_sweep_section(tmp_path):
    manifest, text, report = imported(tmp_path, "tf_hyperdrive.py", "tf-mnist/tf_mnist.py")
    assert yaml.safe_load(text)["sweep"] == {
        "sampling_algorithm": "random",
        "search_space": {
            "--batch-size": {"type": "choice", "values": [32, 64, 128]},
            "--first-layer-neurons": {"type": "choice", "values": [16, 144, 272, 400]},  # choice(range(16, 528, 128))
            "--second-layer-neurons": {"type": "choice", "values": [16, 64, 256, 512]},
            "--learning-rate": {"type": "loguniform", "min_value": -6, "max_value": -1},
        },
        "objective": {"primary_metric": "validation_acc", "goal": "maximize"},  # PrimaryMetricGoal.MAXIMIZE
        "early_termination": {"type": "bandit", "evaluation_interval": 2, "slack_factor": 0.1, "delay_evaluation": 4},
        "limits": {"max_total_trials": 8, "max_concurrent_trials": 4, "timeout": 7200},  # max_duration_minutes=120
    }
    assert isinstance(manifest.sweep, SweepSpec) and manifest.sweep.sampling.type == "random"
    # the trial is the ScriptRunConfig HyperDrive tunes, imported as a plain job is
    assert (manifest.source_directory, manifest.entry_script) == ("tf-mnist", "tf_mnist.py")
    assert manifest.script_params["--data-folder"] == InputRef(input="dataset")
    assert manifest.model.path == "outputs/model"  # best_run.register_model(...) of the best trial
    assert "from HyperDriveConfig(...) at tf_hyperdrive.py:50, its trials ScriptRunConfig(...) at" in text
    assert "tftrain has no sweeps" not in report and "tftrain validate" not in report


def test_v2_sweep_job_becomes_trial_and_sweep_section(tmp_path):
    manifest, text, report = imported(tmp_path, "job_sweep.yml", "src/train.py")
    assert yaml.safe_load(text)["sweep"] == {
        "sampling_algorithm": {"type": "random", "seed": 42, "rule": "sobol"},
        "search_space": {
            "--batch-size": {"type": "choice", "values": [32, 64, 128]},
            "--units": {"type": "quniform", "min_value": 64, "max_value": 512, "q": 64},
            "--dropout": {"type": "uniform", "min_value": 0.1, "max_value": 0.5},
            "--learning-rate": {"type": "loguniform", "min_value": -9.2, "max_value": -2.3},
        },
        "objective": {"primary_metric": "val_accuracy", "goal": "maximize"},
        "early_termination": {
            "type": "truncation_selection",
            "evaluation_interval": 1,
            "delay_evaluation": 2,
            "truncation_percentage": 20,
        },
        "limits": {"max_total_trials": 20, "max_concurrent_trials": 4, "timeout": 7200, "trial_timeout": 1200},
    }
    # the swept flags are the sweep's to set; the trial keeps the rest, the sweep's inputs and outputs included
    assert manifest.script_params == {"--data": InputRef(input="data"), "--epochs": 10, "--model-dir": "outputs/model"}
    assert manifest.inputs["data"].source.startswith("https://storage.googleapis.com/")
    assert manifest.name == "tf-mnist-sweep" and manifest.framework_version == "2.12" and manifest.use_gpu
    assert "compute target 'gpu-cluster'" in report
    assert "TODO" not in uncommented(text) and "tftrain validate" not in report
    assert "# Imported by `tftrain import azureml` from the Azure ML sweep job job_sweep.yml." in text


EXPRESSIONS = [  # (SDK v1 call, v2 search_space entry, the manifest's expression)
    ("choice(1, 2, 3)", "{type: choice, values: [1, 2, 3]}", {"type": "choice", "values": [1, 2, 3]}),
    ("choice(['relu', 'tanh'])", "{type: choice, values: [relu, tanh]}", {"type": "choice", "values": ["relu", "tanh"]}),
    ("randint(10)", "{type: randint, upper: 10}", {"type": "randint", "upper": 10}),
    ("uniform(0.05, 0.1)", "{type: uniform, min_value: 0.05, max_value: 0.1}", {"type": "uniform", "min_value": 0.05, "max_value": 0.1}),
    ("quniform(1, 9, 2)", "{type: quniform, min_value: 1, max_value: 9, q: 2}", {"type": "quniform", "min_value": 1, "max_value": 9, "q": 2}),
    ("loguniform(-6, -1)", "{type: loguniform, min_value: -6, max_value: -1}", {"type": "loguniform", "min_value": -6, "max_value": -1}),
    ("qloguniform(0, 4, 1)", "{type: qloguniform, min_value: 0, max_value: 4, q: 1}", {"type": "qloguniform", "min_value": 0, "max_value": 4, "q": 1}),
    ("normal(10, 3)", "{type: normal, mu: 10, sigma: 3}", {"type": "normal", "mu": 10, "sigma": 3}),
    ("qnormal(10, 3, 1)", "{type: qnormal, mu: 10, sigma: 3, q: 1}", {"type": "qnormal", "mu": 10, "sigma": 3, "q": 1}),
    ("lognormal(0, 1)", "{type: lognormal, mu: 0, sigma: 1}", {"type": "lognormal", "mu": 0, "sigma": 1}),
    ("qlognormal(0, 1, 1)", "{type: qlognormal, mu: 0, sigma: 1, q: 1}", {"type": "qlognormal", "mu": 0, "sigma": 1, "q": 1}),
    ("uniform(min_value=1e-5, max_value=0.1)", "{type: uniform, min_value: 1e-5, max_value: 1e-1}", {"type": "uniform", "min_value": 1e-5, "max_value": 0.1}),
]  # fmt: skip


@pytest.mark.parametrize(("v1", "v2", "expected"), EXPRESSIONS, ids=[e[0] for e in EXPRESSIONS])
def test_every_expression_maps_one_to_one(tmp_path, v1, v2, expected):
    hyperdrive = (
        f"HyperDriveConfig(run_config=src, hyperparameter_sampling=RandomParameterSampling({{'--lr': {v1}}}),"
        " primary_metric_name='acc', primary_metric_goal=PrimaryMetricGoal.MINIMIZE, max_total_runs=4)"
    )
    assert v1_sweep(tmp_path / "v1", hyperdrive)["search_space"] == {"--lr": expected}
    sweep = (
        f"search_space: {{lr: {v2}}}\nobjective: {{goal: minimize, primary_metric: acc}}\nlimits: {{max_total_trials:"
        " 4}\n"
    )
    assert v2_sweep(tmp_path / "v2", sweep)["search_space"] == {"--lr": expected}


@pytest.mark.parametrize(
    ("v1", "v2", "expected"),
    [
        (
            "MedianStoppingPolicy(evaluation_interval=1, delay_evaluation=5)",
            "{type: median_stopping, evaluation_interval: 1, delay_evaluation: 5}",
            {"type": "median_stopping", "evaluation_interval": 1, "delay_evaluation": 5},
        ),
        (
            "TruncationSelectionPolicy(20, 2, exclude_finished_jobs=True)",
            "{type: truncation_selection, truncation_percentage: 20, evaluation_interval: 2, exclude_finished_jobs: true}",
            {"type": "truncation_selection", "truncation_percentage": 20, "evaluation_interval": 2, "exclude_finished_jobs": True},
        ),
        (
            "BanditPolicy(slack_amount=0.2)",
            "{type: bandit, slack_amount: 0.2}",
            {"type": "bandit", "slack_amount": 0.2},
        ),
    ],
)  # fmt: skip
def test_policies_and_samplings_map_with_their_parameters(tmp_path, v1, v2, expected):
    hyperdrive = (
        "HyperDriveConfig(run_config=src, hyperparameter_sampling=BayesianParameterSampling({'--lr': uniform(0, 1)}),"
        f" policy={v1}, primary_metric_name='loss', primary_metric_goal=PrimaryMetricGoal.MINIMIZE, max_total_runs=9)"
    )
    sweep = v1_sweep(tmp_path / "v1", hyperdrive)
    assert sweep["early_termination"] == expected and sweep["sampling_algorithm"] == "bayesian"
    v2 = (
        "sampling_algorithm: bayesian\nsearch_space: {lr: {type: uniform, min_value: 0, max_value: 1}}\nobjective:"
        f" {{goal: minimize, primary_metric: loss}}\nlimits: {{max_total_trials: 9}}\nearly_termination: {v2}\n"
    )
    sweep = v2_sweep(tmp_path / "v2", v2)
    assert sweep["early_termination"] == expected and sweep["sampling_algorithm"] == "bayesian"


def test_v1_grid_with_properties_and_names_without_dashes(tmp_path):
    script = (
        f"{V1_HEAD}space = {{'batch_size': choice(16, 32), '--epochs': choice(range(1, 4))}}\n"
        "htc = HyperDriveConfig(run_config=src, hyperparameter_sampling=GridParameterSampling(space),\n"
        "    primary_metric_name='val_loss', primary_metric_goal=PrimaryMetricGoal.MINIMIZE, max_total_runs=6)\n"
        "Experiment(ws, 'tune').submit(config=htc)\n"
    )
    manifest, text, report = imported(tmp_path, "job.py", "train.py", text=script)
    assert manifest.sweep.search_space["--batch_size"].values == [16, 32]
    assert manifest.sweep.search_space["--epochs"].values == [1, 2, 3]
    assert manifest.sweep.sampling_algorithm == "grid"
    assert "sweep.search_space: 'batch_size' → '--batch_size', the flag HyperDrive passed it as (job.py:4)" in report
    assert "Azure ran as many trials at once as the cluster took" in report  # no max_concurrent_runs


def test_v1_values_not_known_statically_are_todos(tmp_path):
    script = (
        "import os, sys\n"
        f"{V1_HEAD}"
        "top = float(sys.argv[1])\n"
        "ps = RandomParameterSampling({'--lr': uniform(0.001, top), '--units': choice(64, 128)},"
        " properties={'rule': 'sobol', 'seed': 7})\n"
        "htc = HyperDriveConfig(run_config=src, hyperparameter_sampling=ps, primary_metric_name='acc',\n"
        "    primary_metric_goal=goal, max_total_runs=int(os.environ['RUNS']), max_concurrent_runs=2,\n"
        "    resume_from=[HyperDriveRun(exp, 'HD_0b6f')], pipeline=None)\n"
        "Experiment(ws, 'tune').submit(htc)\n"
    )
    text, report = imported_text(tmp_path, "job.py", script)
    lines = text.splitlines()
    assert "    # --lr:  # TODO(tftrain import): uniform(0.001, top) at job.py:6" in lines
    assert "    --units: {type: choice, values: [64, 128]}" in lines
    assert "  sampling_algorithm: {type: random, rule: sobol, seed: 7}" in lines
    assert (
        "  # objective:  # TODO(tftrain import): primary_metric_name='acc', primary_metric_goal=goal: "
        "set primary_metric and goal (maximize|minimize)" in lines
    )
    assert (
        "    # max_total_trials:  # TODO(tftrain import): max_total_runs=int(os.environ['RUNS']) at job.py:8" in lines
    )
    assert "    max_concurrent_trials: 2" in lines
    assert (
        "  # warm_start:  # TODO(tftrain import): was resume_from=[HyperDriveRun(exp, 'HD_0b6f')]; Azure run ids do "
        "not exist here: list the tftrain sweep ids whose finished trials seed this one" in lines
    )
    for todo in (
        "sweep.search_space.--lr: not resolved statically: uniform(0.001, top) (job.py:6)",
        "sweep.objective: not resolved statically: primary_metric_name='acc', primary_metric_goal=goal (job.py:7)",
        "sweep.limits.max_total_trials: not resolved statically: max_total_runs=int(os.environ['RUNS']) (job.py:8)",
        "sweep.warm_start: was resume_from=[HyperDriveRun(exp, 'HD_0b6f')]; Azure run ids do not exist here",
    ):
        assert todo in report
    assert "HyperDriveConfig pipeline=None: no equivalent in tftrain (job.py:9)" in report
    sweep = yaml.safe_load(text)["sweep"]  # with its TODOs filled in, it is a sweep section
    sweep.update(objective={"primary_metric": "acc", "goal": "maximize"}, limits={"max_total_trials": 8})
    sweep["search_space"]["--lr"] = {"type": "uniform", "min_value": 0.001, "max_value": 0.1}
    SweptManifest.model_validate({"name": "tune", "entry_script": "train.py", "sweep": sweep})


def test_v2_sweep_todos_and_what_is_not_swept(tmp_path):
    job = (
        "type: sweep\n"
        "trial:\n"
        "  code: .\n"
        "  command: python train.py --lr ${{search_space.lr}} --name net_${{search_space.depth}}\n"
        "sampling_algorithm: {type: random, logbase: 10}\n"
        "search_space:\n"
        "  lr: {type: uniform, min_value: 0.1, max_value: 0.2}\n"
        "  depth: {type: choice, values: [2, 4]}\n"
        "  unused: {type: randint, upper: 3}\n"
        "  bad: {type: uniform, min: 1}\n"
        "objective: {goal: maximize, primary_metric: acc}\n"
        "limits: {max_total_trials: '${{inputs.n}}', max_concurrent_trials: 2}\n"
        "early_termination: {type: bandit, slack_factor: 0}\n"
        "queue_settings: {job_tier: spot}\n"
    )
    text, report = imported_text(tmp_path, "job.yml", job)
    assert yaml.safe_load(text)["sweep"]["search_space"] == {
        "--lr": {"type": "uniform", "min_value": 0.1, "max_value": 0.2}
    }
    assert "script_params.--name: 'net_${{search_space.depth}}': a sweep parameter in part of a value" in report
    assert (
        "sweep.search_space: 'unused' is not a whole flag value of the trial's command: not swept (job.yml:9)" in report
    )
    assert "sweep.search_space: 'bad' is not a whole flag value" in report
    assert "sampling_algorithm.logbase: tftrain's log expressions are base e (job.yml:5)" in report
    assert "sweep.limits.max_total_trials: not resolved statically: limits.max_total_trials: '${{inputs.n}}'" in report
    assert (
        "sweep.early_termination: early_termination: {'type': 'bandit', 'slack_factor': 0} has no equivalent" in report
    )
    assert (
        "queue_settings.job_tier='spot': a sweep does not retry its trials (a preempted trial ends Failed; `tftrain"
        " sweep resume` runs stopped trials again; see docs/retry.md) (job.yml:14)" in report
    )


def test_v2_expression_the_manifest_refuses_is_a_todo(tmp_path):
    job = (
        "type: sweep\ntrial:\n  code: .\n  command: python train.py --lr ${{search_space.lr}}\n"
        "search_space: {lr: {type: normal, mu: 0, sigma: -1}}\nobjective: {goal: maximize, primary_metric: acc}\n"
    )
    text, report = imported_text(tmp_path, "job.yml", job)
    assert (
        "    # --lr:  # TODO(tftrain import): search_space.lr: {'type': 'normal', 'mu': 0, 'sigma': -1}: sigma: "
        in text
    )
    assert (
        "sweep.search_space.--lr: search_space.lr: {'type': 'normal', 'mu': 0, 'sigma': -1} has no equivalent" in report
    )


def test_only_hyperdrive_functions_are_expressions():
    assert known_callee("choice") == "choice" and known_callee("azureml.train.hyperdrive.uniform") == "uniform"
    assert known_callee("random.choice") is None and known_callee("np.random.uniform") is None
    assert known_callee("azureml.train.hyperdrive.HyperDriveConfig") == "HyperDriveConfig"


def test_v2_sweep_on_spot_is_not_given_retry(tmp_path):
    """retry: does not apply to a sweep's trials: the report says so, the manifest has none."""
    job = (
        "type: sweep\ntrial:\n  code: .\n  command: python train.py --lr ${{search_space.lr}}\nsearch_space: {lr:"
        " {type: uniform, min_value: 0.01, max_value: 0.1}}\nobjective: {primary_metric: acc, goal: maximize}\nlimits:"
        " {max_total_trials: 4}\nqueue_settings: {job_tier: spot}\n"
    )
    manifest, _text, report = imported(tmp_path, "job.yml", "train.py", text=job)
    assert manifest.retry is None and manifest.sweep is not None
    assert "queue_settings.job_tier='spot': a sweep does not retry its trials" in report
    assert "queue_settings: no equivalent" not in report
