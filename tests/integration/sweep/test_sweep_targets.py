"""A trial is a run on any target and of any shape: docker trials (the loser stopped with its
container), two-rank MPI trials, pool trials placed through the leases."""

from __future__ import annotations

import json

from conftest import BASE_IMAGE
from sweeping import show, sweep_manifest
from watching import leftover_containers

# The docker tests' environment: their one heavy image (TensorFlow) serves these trials too.
ENVIRONMENT = (
    f'use_docker: true\ncustom_docker_image: {BASE_IMAGE}\nframework_version: "2.18"\npip_packages: [scikit-learn]\n'
)


def test_a_sweep_of_docker_trials_stops_the_loser_and_its_container(project, cli, home, docker_client):
    extra = "  early_termination: {type: bandit, slack_amount: 0.5, evaluation_interval: 1, delay_evaluation: 1}\n"
    path = sweep_manifest(project, steps=60, pause=0.2, sampling="grid", trials=2, concurrent=2, extra=extra)
    text = path.read_text().replace("[0.01, 0.05, 0.1, 0.2]", "[0.2, 0.01]").replace("[16, 64]", "[16]")
    path.write_text(text.replace("  --pause: 0.2\n", "  --pause: 0.2\n  --slow-below: 0.1\n") + ENVIRONMENT)
    result = cli("run", "-f", str(path), timeout=1200)
    assert result.returncode == 0, result.stderr
    trials = {t["params"]["--lr"]: t for t in show(cli)["trials"]}
    assert trials[0.2]["status"] == "Completed"
    loser = trials[0.01]
    assert loser["status"] == "Canceled" and loser["early_terminated"] is True
    record = json.loads((home / "runs" / loser["run_id"] / "run.json").read_text())
    assert record["manifest"]["compute"]["target"] in (None, "docker") and record["manifest"]["use_docker"] is True
    assert leftover_containers(docker_client, loser["run_id"]) == []


def test_a_trial_can_be_a_two_rank_mpi_job(project, cli, home, lasting_cache):
    """Horovod's environment (the horovod-keras example's, built once per machine) runs each trial's two ranks."""
    path = sweep_manifest(project, trials=2, concurrent=1)
    extra = (
        'framework_version: "2.18"\ndistributed_training:\n  backend: mpi\n  process_count_per_node: 2\ncompute:\n '
        " slots_per_node: 2\n"
    )
    path.write_text(path.read_text() + extra)
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stderr
    trials = show(cli)["trials"]
    assert len(trials) == 2
    for trial in trials:
        assert trial["status"] == "Completed" and trial["value"] is not None
        logs = home / "runs" / trial["run_id"] / "workdir" / "logs"
        assert all(
            "score:" in (logs / f"{rank}.log").read_text() for rank in (0, 1)
        )  # both ranks ran the trial's values


def test_pool_trials_wait_for_their_leases(project, cli, home, docker_client, pool_rig):
    """Two trials at once on a pool whose one host has one slot: each is placed through the
    leases, so the second waits for the first; both complete."""
    host = pool_rig.add_host("box-1", cpu_slots=1)
    path = sweep_manifest(project, trials=2, concurrent=2)
    pool_rig.write_pool(path.parent / "pool.yml", [host], path.parent / "pool-state")
    path.write_text(
        path.read_text() + f"custom_docker_image: {BASE_IMAGE}\ncompute:\n  target: pool\n  pool_file: pool.yml\n"
    )
    result = cli("run", "-f", str(path), timeout=900)
    assert result.returncode == 0, result.stderr
    trials = show(cli)["trials"]
    assert [t["status"] for t in trials] == ["Completed", "Completed"]
    spans = []
    for trial in trials:
        phases = json.loads((home / "runs" / trial["run_id"] / "run.json").read_text())["phases"]
        running = next(p for p in phases if p["phase"] == "Running")
        spans.append((running["started"], running["ended"]))
    first, second = sorted(spans)
    assert second[0] >= first[1]  # never both on the one slot


def test_kubernetes_trials_are_jobs_of_their_own(cluster_manifest, cli, home, kube_api):
    sweep = (
        "sweep:\n  sampling_algorithm: grid\n  search_space:\n    --learning-rate: {type: choice, values: [0.01,"
        " 0.1]}\n  objective: {primary_metric: loss, goal: minimize}\n"
    )
    cluster_manifest.write_text(cluster_manifest.read_text() + sweep)
    result = cli("run", "-f", str(cluster_manifest), timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    trials = show(cli)["trials"]
    assert [t["status"] for t in trials] == ["Completed", "Completed"] and {t["value"] for t in trials} == {0.25}
    assert len(kube_api.jobs) == 2
    args = sorted(str(job["spec"]) for job in kube_api.jobs.values())
    assert "0.01" in args[0] + args[1] and "0.1" in args[0] + args[1]  # each job runs its trial's value
