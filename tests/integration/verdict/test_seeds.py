"""`evaluation:` for real: the seeds trained as runs (local and Slurm), the evidence kept in the run
and the version, the verdict at the run's end, and what happens when a seed or its file fails."""

from __future__ import annotations

import json

import pytest
from slurming import slurm_manifest

# A "model" whose per-example correctness is drawn with NumPy's global generator: the seeding layer
# seeds it from TFTRAIN_SEED, so every seed scores differently and a seed scores the same twice.
SCRIPT = """
import json, os, sys
import numpy as np
accuracy = float(sys.argv[sys.argv.index("--accuracy") + 1]) if "--accuracy" in sys.argv else 0.9
fail = os.environ.get("TFTRAIN_SEED") in os.environ.get("FAIL_SEEDS", "").split(",")
if fail:
    sys.exit(3)
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.bin", "w").write(os.environ["TFTRAIN_SEED"])
if os.environ.get("NO_EVIDENCE_SEEDS", "-") != os.environ["TFTRAIN_SEED"]:
    with open("outputs/eval.jsonl", "w") as out:
        for i in range(3000):
            out.write(json.dumps({"id": f"e{i}", "correct": int(np.random.random() < accuracy)}) + "\\n")
print(f"accuracy={accuracy}")
"""
EVALUATION = (
    'model: {gate: "off"}\nevaluation:\n  per_example: outputs/eval.jsonl\n  metric: correct\n  seeds: 3\n  margin:'
    " 0.01\n"
)


def _record(home, run_id: str) -> dict:
    return json.loads((home / "runs" / run_id / "run.json").read_text())


def test_three_local_seeds_keep_their_evidence_and_a_degraded_candidate_is_worse(project, cli, home):
    path = project(SCRIPT, EVALUATION, name="verdict")
    first = cli("run", "-f", str(path), timeout=300)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert "evaluation: 3 seeds (TFTRAIN_SEED 0…2)" in first.stdout and "registered model verdict@v1" in first.stdout
    assert "No earlier version of verdict in this home" in first.stdout
    record = _record(home, "verdict-1")  # seed 0 is the run, recorded first
    block = record["evaluation"]
    assert record["model"] == "verdict@v1" and block["asked"] == 3 and [s["seed"] for s in block["seeds"]] == [0, 1, 2]
    assert len({s["mean"] for s in block["seeds"]}) == 3  # each seed drew its own
    for seed_run in block["runs"][1:]:
        other = _record(home, seed_run)
        assert other["seed"] == {"seed": block["runs"].index(seed_run), "of": "verdict-1"} and other["model"] is None
        assert (home / "runs" / seed_run / "tftrain.log").is_file()  # its console, kept in its run
    assert not (home / "seeds").exists()
    version = home / "models" / "verdict" / "v1"
    assert sorted(p.name for p in (version / "evaluation").iterdir()) == [
        "evaluation.json",
        "seed-0.jsonl",
        "seed-1.jsonl",
        "seed-2.jsonl",
    ]
    info = json.loads((version / "version.json").read_text())
    assert (
        set(info["extras"]) >= {"evaluation/seed-0.jsonl", "evaluation/evaluation.json"}
        and info["evaluation"]["metric"] == "correct"
    )
    assert "### Evaluation" in (home / "runs" / "verdict-1" / "summary.md").read_text()

    # the same code again: the same seeds draw the same examples, never better or worse
    same = cli("run", "-f", str(path), timeout=300)
    assert same.returncode == 0 and "vs verdict@v1" in same.stdout
    verdict = _record(home, "verdict-4")["evaluation"]["verdict"]
    assert verdict["verdict"] in ("equivalent", "inconclusive") and verdict["seeds"] == {"candidate": 3, "baseline": 3}

    # clearly worse: 0.8 against 0.9
    path.write_text(path.read_text() + "script_params:\n  --accuracy: 0.8\n")
    worse = cli("run", "-f", str(path), timeout=300)
    assert worse.returncode == 0, worse.stderr  # the run succeeded; the verdict is what fails a pull request
    assert "→ worse at ±1.0 pp" in worse.stdout
    assert _record(home, "verdict-7")["evaluation"]["verdict"]["verdict"] == "worse"


def test_a_failed_seed_is_counted_out_and_a_missing_file_is_one_warning(project, cli, home, monkeypatch):
    monkeypatch.setenv("FAIL_SEEDS", "2")
    monkeypatch.setenv("NO_EVIDENCE_SEEDS", "1")
    path = project(SCRIPT, EVALUATION, name="partial")
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert (
        "seed 1: outputs/eval.jsonl: not found (the script did not write it): seed 1 is left out of the verdict"
        in result.stdout + result.stderr
    )
    block = _record(home, "partial-1")["evaluation"]
    assert [s["seed"] for s in block["seeds"]] == [0] and {f["seed"] for f in block["failed"]} == {1, 2}
    assert "Traceback" not in result.stdout + result.stderr
    assert "1 of 3 seeds gave evidence" in (home / "runs" / "partial-1" / "summary.md").read_text()


def test_seed_zero_failing_fails_the_run_with_its_exit_code_and_registers_nothing(project, cli, home, monkeypatch):
    monkeypatch.setenv("FAIL_SEEDS", "0")
    result = cli("run", "-f", str(project(SCRIPT, EVALUATION, name="broken")), timeout=300)
    assert result.returncode != 0 and "run broken-1 Failed" in result.stderr
    assert not (home / "models" / "broken").exists()
    block = _record(home, "broken-1")["evaluation"]  # the other seeds' evidence is kept all the same
    assert [s["seed"] for s in block["seeds"]] == [1, 2] and block["verdict"] is None, (block, result.stdout[-3000:])


def test_seeds_on_the_slurm_cluster_are_one_job_each(project, cli, home, slurm_cluster):
    path = slurm_manifest(project, SCRIPT, EVALUATION.replace('model: {gate: "off"}\n', ""), name="slurmseeds")
    result = cli("run", "-f", str(path), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "evaluation: 3 seeds (TFTRAIN_SEED 0…2), 3 at once" in result.stdout
    assert result.stdout.count("slurm job") >= 1  # seed 0's job, in the run's console
    block = _record(home, "slurmseeds-1")["evaluation"]
    assert [s["seed"] for s in block["seeds"]] == [0, 1, 2] and len({s["mean"] for s in block["seeds"]}) == 3
    for seed_run in block["runs"][1:]:
        assert "slurm job" in (home / "runs" / seed_run / "tftrain.log").read_text()


@pytest.mark.parametrize("set_seed", [True, False])
def test_the_seeding_layer_is_on_unless_set_seed_is_false(project, cli, home, set_seed):
    script = (
        "import random, os\nprint('draw', os.environ['TFTRAIN_SEED'], random.random())\nos.makedirs('outputs',"
        " exist_ok=True)\nopen('outputs/eval.jsonl', 'w').write('{\"id\": 1, \"correct\": 1}\\n')\n"
    )
    extra = EVALUATION.replace("seeds: 3", "seeds: 1") + f"  set_seed: {str(set_seed).lower()}\n"
    result = cli("run", "-f", str(project(script, extra, name="seeded")), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    seeded = "draw 0 0.8444218515250481" in result.stdout  # random.seed(0)'s first draw
    assert seeded is set_seed


def test_a_sweeps_best_trial_keeps_its_evidence_beside_its_model(project, cli, home):
    from sweeping import SCRIPT as SWEPT
    from sweeping import sweep_manifest

    script = (
        SWEPT + "import json, random\nwith open('outputs/eval.jsonl', 'w') as out:\n"
        "    for i in range(500): out.write(json.dumps({'id': i, 'correct': int(random.random() < 0.9)}) + '\\n')\n"
    )
    extra = 'model: {gate: "off"}\n' + EVALUATION.replace('model: {gate: "off"}\n', "").replace("seeds: 3", "seeds: 1")
    result = cli("run", "-f", str(sweep_manifest(project, trials=2, extra=extra, script=script)), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    trials = [json.loads(p.read_text()) for p in sorted((home / "runs").glob("*/run.json"))]
    assert {t["manifest"]["environment_variables"].get("TFTRAIN_SEED") for t in trials} == {
        "0"
    }  # every trial seeded alike
    info = json.loads((home / "models" / "demo" / "v1" / "version.json").read_text())
    best = _record(home, info["run_id"])
    assert best["model"] == "demo@v1" and [s["seed"] for s in best["evaluation"]["seeds"]] == [0]
    assert (
        "evaluation/seed-0.jsonl" in info["extras"]
        and (home / "models" / "demo" / "v1" / "evaluation" / "seed-0.jsonl").is_file()
    )


def test_comparing_another_seeds_run_points_at_the_run_that_keeps_the_evidence(project, cli, home):
    path = project(SCRIPT, EVALUATION.replace("seeds: 3", "seeds: 2"), name="pointer")
    assert cli("run", "-f", str(path), timeout=300).returncode == 0
    assert cli("run", "-f", str(path), timeout=300).returncode == 0
    result = cli("compare", "pointer-2", "pointer@v1")
    assert result.returncode == 32 and "Traceback" not in result.stderr
    assert (
        "the candidate pointer-2 is seed 1 of run pointer-1, which keeps every seed's evidence: compare pointer-1"
        in result.stderr
    )


def test_seed_zeros_model_refused_by_the_gate_fails_the_run_and_keeps_the_evidence(
    project, cli, home, tmp_path, monkeypatch
):
    script = SCRIPT.replace('open("outputs/model/weights.bin", "w")', 'open("outputs/model/saved_model.pb", "w")')
    outputs = tmp_path / "github-output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outputs))
    path = project(
        script,
        EVALUATION.replace('model: {gate: "off"}', "model: {gate: required}").replace("seeds: 3", "seeds: 2"),
        name="refused",
    )
    result = cli("run", "-f", str(path), timeout=300)
    assert result.returncode == 28 and "Traceback" not in result.stdout + result.stderr  # the gate's exit code
    record = _record(home, "refused-1")
    assert record["status"] == "Failed" and record["model"] is None and len(record["evaluation"]["seeds"]) == 2
    assert not (home / "models" / "refused").exists()
    statuses = [line for line in outputs.read_text().splitlines() if line in ("Completed", "Failed")]
    assert statuses[-1] == "Failed"  # the step's output: the last value written wins
