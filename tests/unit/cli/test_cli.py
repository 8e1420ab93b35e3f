from __future__ import annotations

import gc
import json
import os
import sys
import types

import pytest

from runner.cli import main
from runner.templates import templates_dir


def test_version_and_schema(cli, repo):
    assert cli("--version").stdout.strip().startswith("tftrain ")
    assert cli("schema").stdout == (repo / "tftrain.schema.json").read_text()
    assert cli("pool", "schema").stdout == (repo / "tftrain-pool.schema.json").read_text()


def test_plan_prints_the_commands_without_running(project, cli, home):
    path = project(script="raise SystemExit('must not run')\n", manifest="script_params:\n  --epochs: 3\n")
    result = cli("plan", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "launcher:    single" in result.stdout
    assert "train.py --epochs 3" in result.stdout
    assert "env TFTRAIN_RUN_ID='$RUN_ID'" in result.stdout
    document = json.loads(cli("plan", "-f", str(path), "--json").stdout)
    assert document["tasks"][0]["argv"][1:] == ["train.py", "--epochs", "3"]
    assert not (home / "runs").exists()


def test_plan_prints_what_a_cluster_target_submits_as_its_catalog_row_says(project, cli, home):
    slurm = cli("plan", "-f", str(project(manifest="compute:\n  target: slurm\n  slurm:\n    partition: debug\n")))
    assert slurm.returncode == 0, slurm.stderr
    assert "launcher:    single" in slurm.stdout and "batch script (sbatch):\n  #!/bin/bash" in slurm.stdout
    kubernetes = cli(
        "plan",
        "-f",
        str(
            project(
                manifest=(
                    "use_docker: true\ncompute:\n  target: kubernetes\n  kubernetes:\n    image:"
                    " registry.example/train:1\n"
                )
            )
        ),
    )
    assert kubernetes.returncode == 0, kubernetes.stderr
    # the resources are the plan
    assert kubernetes.stdout.startswith("apiVersion:") and "launcher:" not in kubernetes.stdout


def test_unknown_run_and_model(cli, home):
    result = cli("runs", "show", "nope-3")
    assert result.returncode == 5 and "run 'nope-3' not found" in result.stderr
    result = cli("models", "pull", "nope@v1", "-o", str(home / "x"))
    assert result.returncode == 5 and "model nope@v1 is not registered" in result.stderr
    assert "no models registered yet" in cli("models").stdout
    assert "no runs yet" in cli("runs").stdout


def test_templates_ship_with_the_package():
    import runner

    package = templates_dir().parent
    if "site-packages" in runner.__file__:  # scripts/test installs tftrain non-editable
        assert package.name == "runner" and (package / "templates" / "run_summary.md.j2").exists()
    else:
        assert (package / "templates" / "run_summary.md.j2").exists()


def test_a_bad_action_input_is_one_line_naming_it(cli, home):
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith(("INPUT_", "GITHUB_"))}
    result = cli("github", "check", env={**env, "INPUT_ALLOW_FORKS": "yes"})
    assert (result.returncode, result.stderr) == (2, "tftrain: error: input allow-forks: 'yes' is not true or false\n")
    result = cli("github", "comment", env={**env, "INPUT_FAIL_ON_REGRESSION": "abc"})
    assert (result.returncode, result.stderr) == (
        2,
        "tftrain: error: input fail-on-regression: 'abc' is not a number\n",
    )
    result = cli("publish", "--when", "never", env={**env, "INPUT_TAG_TEMPLATE": "v1"})
    assert result.returncode == 7 and "tag-template 'v1' needs {version}" in result.stderr
    # the flag wins over the input: the same bad input does not matter then
    assert cli("github", "check", "--allow-forks", "false", env={**env, "INPUT_ALLOW_FORKS": "yes"}).returncode == 0


def test_a_command_runs_with_the_imports_frozen_and_pydantic_plugins_off(monkeypatch, capsys):
    """What importing the command made is frozen (no collection traverses it), pydantic's plugin
    scan is off for tftrain's process; both undone once the command returns, or fails to parse."""
    seen = {}

    def run(args, logger) -> int:
        seen.update(
            plugins=os.environ.get("PYDANTIC_DISABLE_PLUGINS"), frozen=gc.get_freeze_count(), enabled=gc.isenabled()
        )
        return 0

    command = types.ModuleType("tftrain_test_command")
    command.add_arguments, command.run = (lambda parser: None), run
    monkeypatch.setitem(sys.modules, command.__name__, command)
    monkeypatch.setitem(main.COMMANDS, "probe", (command.__name__, "a test's command"))
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    assert main.main(["probe"]) == 0
    assert seen["plugins"] == "__all__" and seen["frozen"] > 0 and seen["enabled"]
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ and gc.get_freeze_count() == 0 and gc.isenabled()
    with pytest.raises(SystemExit):
        main.main(["--version"])
    assert gc.get_freeze_count() == 0 and gc.isenabled()
