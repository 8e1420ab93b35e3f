"""runner.targets.leftovers: what a lost run left running is removed when `reconcile` marks it
lost (never when the history is only opened); its containers only when it ran on the docker target
(a stand-in daemon here)."""

from __future__ import annotations

import json

import pytest

import runner.environments as environments
from runner.history.rundir import RunPaths
from runner.history.store import Store
from runner.manifest import load_manifest
from runner.targets.leftovers import reconcile


class Daemon:
    def __init__(self) -> None:
        self.asked, self.removed = [], []

    def __call__(self):
        return self

    @property
    def containers(self):
        return self

    def list(self, all: bool, filters: dict):
        self.asked.append(filters["label"])
        daemon = self

        class Left:
            def remove(self, force: bool) -> None:
                daemon.removed.append(force)

        return [Left()]


@pytest.mark.parametrize("docker", [True, False], ids=["docker", "local"])
def test_a_lost_runs_containers_are_removed_on_the_docker_target(project, tmp_path, monkeypatch, docker):
    daemon = Daemon()
    monkeypatch.setattr(environments, "docker_client", daemon)
    loaded = load_manifest(project(manifest="use_docker: true\n" if docker else ""))
    home, notes = tmp_path / "home", []
    with Store(home) as store:
        run_id = store.new_run("demo", loaded.manifest.model_dump_json(by_alias=True))
        record = RunPaths.for_run(home, run_id, loaded.manifest).record
        data = json.loads(record.read_text())
        data["owner"]["start"] = -1  # its tftrain is gone
        record.write_text(json.dumps(data))
    with Store(home, notify=notes.append) as store:
        assert daemon.asked == [] and notes == []  # opening the history removes nothing
        reconcile(store)
    if docker:
        assert daemon.asked == ["tftrain.run-id=demo-1"] and daemon.removed == [True]
        assert notes == [
            "run demo-1 marked Failed (lost: tftrain process %d ended); removed 1 container it left running"
            % data["owner"]["pid"]
        ]
    else:
        assert daemon.asked == [] and notes == [
            "run demo-1 marked Failed (lost: tftrain process %d ended)" % data["owner"]["pid"]
        ]
