"""The catalog, the factory and the base: one class per backend, behind one protocol with defaults."""

from __future__ import annotations

import ast
import threading
import types
from pathlib import Path

import pytest

import runner.targets.base as base
from runner.errors import UnsupportedError
from runner.shared.catalog import BUILT_IN as NAMES
from runner.targets.base import RunControl, Target, TargetState
from runner.targets.factory import target_for


def test_each_name_gives_a_fresh_target_of_its_class():
    from runner.targets.docker.target import DockerTarget
    from runner.targets.kubernetes.target import KubernetesTarget
    from runner.targets.local.target import LocalTarget
    from runner.targets.pool.target import PoolTarget
    from runner.targets.slurm.target import SlurmTarget

    classes = {
        "local": LocalTarget,
        "docker": DockerTarget,
        "kubernetes": KubernetesTarget,
        "pool": PoolTarget,
        "slurm": SlurmTarget,
    }
    assert set(NAMES) == set(classes)
    for name, cls in classes.items():
        target = target_for(name)
        assert type(target) is cls and isinstance(target, Target) and target.name == name
        assert target_for(name) is not target  # one per run: what a run reserves is its own


def test_an_unknown_target_is_one_line_refused():
    with pytest.raises(UnsupportedError) as refused:
        target_for("azureml")
    assert str(refused.value) == "compute.target: 'azureml' is not available in this version of tftrain"


def test_the_base_imports_no_backend():
    tree = ast.parse(Path(base.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    backends = {f"runner.targets.{name}" for name in NAMES}
    assert not {module for module in imported if module and module.startswith(tuple(backends))}


class Bare(Target):
    name = "bare"


def test_the_defaults_reserve_nothing_and_leave_the_plan_as_it_is():
    state = TargetState()
    control = RunControl(marker="m", grace_seconds=1)
    with Bare().reserve(None, state, "r1", control, None) as held:
        assert held is state
    plan = object()
    assert Bare().finalize(plan, None, "r1") is plan
    paths = types.SimpleNamespace(runtime=lambda inputs, resume: ("view", inputs, resume))
    assert Bare().runtime(None, None, paths, {"data": Path("/d")}, None) == (("view", {"data": Path("/d")}, None), None)


def test_the_pool_keeps_its_placed_job_on_the_target_not_in_its_module(monkeypatch):
    from contextlib import contextmanager

    from runner.errors import PlacementError
    from runner.targets.pool import target as module
    from runner.targets.pool.dispatch import PoolSession
    from runner.targets.pool.target import PoolTarget

    session = object.__new__(PoolSession)

    @contextmanager
    def placed(loaded, job, run_id, control, logger):
        yield session

    monkeypatch.setattr(module, "reserve_capacity", placed)
    pool, other = PoolTarget(), PoolTarget()
    control = RunControl(marker="m", grace_seconds=1, cancel=threading.Event())
    with pool.reserve(None, None, "r1", control, None) as held:
        assert held is session and pool.session is session and other.session is None
        assert not [value for value in vars(module).values() if isinstance(value, PoolSession)]
    assert pool.session is None
    with pytest.raises(PlacementError, match="runs only inside `tftrain run`"):
        other.execute(None, None, {}, control, None)


def test_the_manifest_the_cli_and_the_factory_take_their_names_from_the_catalog(capsys, tmp_path):
    import argparse

    from runner.cli.common import add_manifest_arg
    from runner.errors import ManifestError
    from runner.manifest import load_manifest
    from runner.manifest.model import ComputeSpec
    from runner.shared.catalog import TARGETS

    parser = argparse.ArgumentParser()
    add_manifest_arg(parser, target=True)
    assert NAMES == tuple(TARGETS)
    for name in NAMES:
        assert parser.parse_args(["--target", name]).target == name
        assert ComputeSpec(target=name).target == name
    with pytest.raises(SystemExit):
        parser.parse_args(["--target", "slurn"])
    assert (
        "'slurn' is not a target: one of local, docker, pool, kubernetes, slurm; did you mean 'slurm'?"
        in capsys.readouterr().err
    )
    assert ComputeSpec.model_json_schema()["properties"]["target"]["anyOf"][0]["enum"] == list(
        NAMES
    )  # the schema: the built-in ones
    (tmp_path / "train.py").write_text("")
    (tmp_path / "tftrain.yml").write_text("name: m\nentry_script: train.py\ncompute:\n  target: slurn\n")
    with pytest.raises(ManifestError) as refused:
        load_manifest(tmp_path / "tftrain.yml")
    assert (
        "compute.target: 'slurn' is not one of 'local', 'docker', 'pool', 'kubernetes' or 'slurm'; did you mean"
        " 'slurm'?" in str(refused.value)
    )


def test_the_catalog_imports_nothing_of_tftrain():
    import runner.shared.catalog as catalog

    tree = ast.parse(Path(catalog.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [module for module in imported if module and module.startswith("runner") and module != "runner.errors"]


def test_a_backends_own_command_is_reached_through_the_factory():
    from runner.targets.factory import target_command
    from runner.targets.pool import survey

    assert target_command("pool") is survey
    for name in ("local", "no-such-target"):
        with pytest.raises(UnsupportedError, match="has no command of its own"):
            target_command(name)


def test_a_plugin_row_naming_a_missing_class_is_one_line(monkeypatch):
    from runner.shared import catalog

    monkeypatch.setitem(
        catalog.TARGETS, "ghost", catalog.TargetRow("Ghost", False, False, module="no_such_plugin.target")
    )
    with pytest.raises(
        UnsupportedError, match=r"compute.target: ghost: its class no_such_plugin.target.Ghost cannot be loaded"
    ):
        target_for("ghost")
    monkeypatch.setitem(
        catalog.TARGETS, "hollow", catalog.TargetRow("Hollow", False, False, module="runner.targets.base")
    )
    with pytest.raises(UnsupportedError, match=r"runner.targets.base.Hollow cannot be loaded"):
        target_for("hollow")


def test_a_plugin_that_fails_or_takes_a_name_is_one_line(monkeypatch):
    from importlib import metadata

    from runner.shared import catalog

    class Point:
        def __init__(self, name, value, load):
            self.name, self.value, self.load = name, value, load

    def boom():
        raise RuntimeError("no config")

    points = [Point("broken", "broken_plugin:register", lambda: boom)]
    monkeypatch.setattr(catalog, "_plugins_read", False)
    monkeypatch.setattr(metadata, "entry_points", lambda group: points)
    with pytest.raises(
        UnsupportedError, match=r"target plugin broken \(broken_plugin:register\): RuntimeError: no config"
    ):
        catalog.row_of("nothing-here")
    points[:] = [Point("local", "thief:ROW", lambda: catalog.TargetRow("Thief", False, True))]
    monkeypatch.setattr(catalog, "_plugins_read", False)
    with pytest.raises(UnsupportedError, match=r"target local: already registered"):
        catalog.names()
    assert catalog.TARGETS["local"].cls == "LocalTarget"
