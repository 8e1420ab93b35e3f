"""Sweeps beyond HyperDrive through the real CLI: asha and hyperband stop losing trials at their
rungs (the run record's cause says so, the table and the summary too); a multi-objective sweep is
told every objective, shows its Pareto front and registers the front's best on the first objective;
a trial that never reports an objective fails and says which."""

from __future__ import annotations

import json
import re

from sweeping import SCRIPT, show, sweep_manifest

# score as sweeping.SCRIPT's; latency falls as the batch grows: score and latency pull apart
MULTI_SCRIPT = SCRIPT.replace(
    "args = parser.parse_args()\n",
    'parser.add_argument("--all-report", type=int, default=0)\nargs = parser.parse_args()\n',
).replace(
    '    print(f"step {step} score: {score:.5f}", flush=True)\n',
    '    print(f"step {step} score: {score:.5f}", flush=True)\n'
    "    if not (args.lr == 0.01 and args.bs == 64) or args.all_report:\n"
    '        print(f"latency: {1000 / args.bs - args.lr * 10:.5f}", flush=True)\n',
)
assert MULTI_SCRIPT != SCRIPT

MULTI = """\
script_params:
  --steps: 3
  --pause: 0.01
  --all-report: {all_report}
metrics:
  regex:
    score: 'score: ([0-9.-]+)'
    latency_ms: 'latency: ([0-9.-]+)'
sweep:
  sampling_algorithm: {{type: grid, seed: {seed}}}
  search_space:
    --lr: {{type: choice, values: [0.01, 0.2]}}
    --bs: {{type: choice, values: [16, 64]}}
  objective: [{{primary_metric: score, goal: maximize}}, {{primary_metric: latency_ms, goal: minimize}}]
  limits: {{max_total_trials: 4, max_concurrent_trials: 1}}
"""


def pruned_trials(cli, home, steps: int) -> list[dict]:
    """The trials the policy stopped, each checked against its run record: cause, message, stopped early."""
    document = show(cli)
    stopped = [t for t in document["trials"] if t["early_terminated"]]
    for trial in stopped:
        record = json.loads((home / "runs" / trial["run_id"] / "run.json").read_text())
        assert record["status"] == "Canceled" and record["cause"] == "early termination"
        assert record["message"].startswith("early termination at step ")
        assert int(re.fullmatch(r"early termination at step (\d+)", record["message"]).group(1)) < steps
    for trial in document["trials"]:
        if not trial["early_terminated"]:
            record = json.loads((home / "runs" / trial["run_id"] / "run.json").read_text())
            assert "cause" not in record and record["status"] == "Completed"
    return stopped


def test_asha_stops_the_trials_below_the_rung(project, cli, home):
    # one trial at a time: a later trial worse than the better half at step 1 (then 2, 4) stops there
    extra = "  early_termination: {type: asha, min_resource: 1, reduction_factor: 2}\n"
    path = sweep_manifest(
        project, steps=12, pause=0.02, sampling="{type: grid, seed: 1}", trials=4, concurrent=1, extra=extra
    )
    path.write_text(path.read_text().replace("[16, 64]", "[16]"))
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    stopped = pruned_trials(cli, home, steps=12)
    assert stopped, show(cli)
    document = show(cli)
    best = max((t for t in document["trials"] if t["status"] == "Completed"), key=lambda t: t["value"])
    assert document["best"]["number"] == best["number"] and best["params"]["--lr"] == 0.2  # the best is never cut
    summary = (home / "sweeps" / document["id"] / "summary.md").read_text()
    assert summary.count("(early termination)") == len(stopped)


def test_hyperband_runs_end_to_end_and_prunes_within_its_brackets(project, cli, home):
    extra = "  early_termination: {type: hyperband, min_resource: 1, max_resource: 8, reduction_factor: 2}\n"
    path = sweep_manifest(
        project, steps=12, pause=0.05, sampling="{type: random, seed: 4}", trials=10, concurrent=1, extra=extra
    )
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    document = show(cli)
    assert document["status"] == "Completed" and len(document["trials"]) == 10
    assert {t["status"] for t in document["trials"]} <= {"Completed", "Canceled"}
    assert pruned_trials(cli, home, steps=12), document


def test_a_multi_objective_sweep_shows_its_pareto_front_and_registers_its_best_on_the_first(project, cli, home):
    path = project(script=MULTI_SCRIPT, manifest=MULTI.format(seed=2, all_report=1))
    result = cli("run", "-f", str(path))
    assert result.returncode == 0, result.stderr
    document = show(cli)
    assert document["objective"] == [
        {"primary_metric": "score", "goal": "maximize"},
        {"primary_metric": "latency_ms", "goal": "minimize"},
    ]
    by_params = {(t["params"]["--lr"], t["params"]["--bs"]): t for t in document["trials"]}
    assert {t["status"] for t in document["trials"]} == {"Completed"}
    for (lr, bs), trial in by_params.items():
        assert (
            trial["values"]["latency_ms"] == round(1000 / bs - lr * 10, 5)
            and trial["value"] == trial["values"]["score"]
        )
    # lr 0.2 beats lr 0.01 on both; of the two, bs 16 scores higher, bs 64 answers faster
    front = [by_params[(0.2, 16)]["number"], by_params[(0.2, 64)]["number"]]
    assert document["pareto"] == front
    best = by_params[(0.2, 16)]
    assert document["best"] == {
        "number": best["number"],
        "run_id": best["run_id"],
        "value": best["value"],
        "values": best["values"],
        "model_version": "demo@v1",
    }
    info = json.loads((home / "models" / "demo" / "v1" / "version.json").read_text())
    assert info["run_id"] == best["run_id"] and info["sweep"]["values"] == best["values"]
    assert info["sweep"]["chosen"] == "on the Pareto front, the best on score"
    summary = (home / "sweeps" / document["id"] / "summary.md").read_text()
    assert "| trial | run | status | score | latency_ms | params |" in summary and "Pareto front (2 trials" in summary
    assert summary.count("(Pareto front)") == 2
    shown = cli("sweeps", "show", "latest")
    assert shown.returncode == 0 and f"Pareto front: trials {front[0]}, {front[1]}" in shown.stdout + shown.stderr


def test_a_trial_that_never_reports_an_objective_fails_and_says_which(project, cli, home):
    # the (0.01, 64) trial prints no latency: it fails; the others complete; it is never on the front
    path = project(script=MULTI_SCRIPT, manifest=MULTI.format(seed=3, all_report=0))  # that trial is not the first
    result = cli("run", "-f", str(path))
    document = show(cli)
    failed = [t for t in document["trials"] if t["status"] == "Failed"]
    assert result.returncode == 0, result.stderr
    assert [(t["params"]["--lr"], t["params"]["--bs"]) for t in failed] == [(0.01, 64)], document
    assert failed[0]["message"] == "completed without reporting 'latency_ms'; it reported: score"
    assert failed[0]["number"] not in document["pareto"]
    assert failed[0]["values"] == {"score": 0.066, "latency_ms": None}  # what its run did report
    summary = (home / "sweeps" / document["id"] / "summary.md").read_text()
    # the summary and `sweeps show` agree
    assert f"| {failed[0]['number']} | {failed[0]['run_id']} | Failed | 0.066 |  |" in summary
