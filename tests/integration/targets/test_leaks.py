"""A secret never reaches anything tftrain prints or stores, and user text is never rich markup:
real runs through the CLI, then every file under TFTRAIN_HOME (the DB included) is searched."""

from __future__ import annotations

import json
import textwrap

import pytest

pytestmark = pytest.mark.integration

# Multi-line, with `"` and `\` (stored JSON-escaped unless masked before serialising).
SECRET = 'Zq7"kT\\p-9081-alpha\nsecond-line-C3d4x\nthird-line-E5f6y'
NAME = "TFTRAIN_LEAK_TOKEN"

LEAKY = """\
import os, sys
from runner import log_metric
from runner.api import append_record

secret = os.environ["TFTRAIN_LEAK_TOKEN"]
first = secret.splitlines()[0]
log_metric(f"acc-{secret}", 0.5, step=1)
log_metric(f"acc-{secret}", 0.75, step=2)
log_metric(first, 0.1, step=1)
append_record({"tag": f"token-{first}", "value": secret})
append_record({"image": f"outputs/{first}.png", "name": secret})
for line in secret.splitlines():  # line by line
    print("line:", line)
print(secret, file=sys.stderr)
print("loss=0.25")  # a metric from the manifest's regex over the logs
sys.stdout.write(("-" + first) * (3 * (1 << 20) // 2 // (len(first) + 1)) + "\\n")  # 1.5 MiB: cut at 1 MiB
sys.stdout.flush()
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.txt", "w").write("weights")
if os.environ.get("VERDICT"):
    append_record({"status": "failed", "error": f"gave up on {secret}"})
if os.environ.get("RAISE"):
    raise ValueError(f"bad {first}")
"""


def forms(value: str) -> set[str]:
    """The value and each of its lines, as they are and JSON-escaped."""
    parts = {value, *(line for line in value.splitlines() if len(line) >= 4)}
    return {
        form for part in parts for form in (part, json.dumps(part)[1:-1], json.dumps(part, ensure_ascii=False)[1:-1])
    }


def leaks_in(data: bytes, where: str) -> list[str]:
    return [f"{where}: {form!r}" for form in forms(SECRET) if form.encode() in data]


def test_a_secret_is_masked_in_every_file_and_every_output(project, cli, home, monkeypatch):
    monkeypatch.setenv(NAME, SECRET)
    path = project(script=LEAKY, manifest=f"secrets: [{NAME}]\nmetrics:\n  regex:\n    loss: 'loss=(\\S+)'\n")
    completed = cli("run", "-f", str(path), timeout=180)
    assert completed.returncode == 0, completed.stderr[-3000:]
    monkeypatch.setenv("VERDICT", "1")
    verdict = cli("run", "-f", str(path), timeout=180)
    assert verdict.returncode == 10, verdict.stderr[-3000:]
    monkeypatch.delenv("VERDICT")
    monkeypatch.setenv("RAISE", "1")
    raised = cli("run", "-f", str(path), timeout=180)
    assert raised.returncode == 10, raised.stderr[-3000:]
    outputs = [completed, verdict, raised]
    for args in (
        ["runs"],
        ["runs", "show", "demo-1"],
        ["runs", "show", "demo-2"],
        ["runs", "show", "demo-3", "--markdown"],
        ["metrics", "demo-1"],
        ["metrics", "demo-1", "--json"],
        ["models"],
    ):
        shown = cli(*args)
        assert shown.returncode == 0, (args, shown.stderr)
        outputs.append(shown)

    found = []
    for index, result in enumerate(outputs):
        found += leaks_in(result.stdout.encode(), f"stdout of command {index}")
        found += leaks_in(result.stderr.encode(), f"stderr of command {index}")
    files = [p for p in home.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "tftrain.db" for p in files)
    for file in files:
        found += leaks_in(file.read_bytes(), str(file.relative_to(home)))
    assert found == []

    # what was masked is still there, masked
    run = home / "runs/demo-1"
    summary = json.loads((run / "metrics.json").read_text())
    assert summary["metrics"]["acc-***"]["last"] == 0.75 and summary["tags"] == {"token-***": "***"}
    assert summary["images"][0]["path"] == "outputs/***.png"
    log = (run / "workdir/logs/0.log").read_bytes()
    assert b"line: ***\n" in log and log.count(b"-***") == 3 * (1 << 20) // 2 // (len(SECRET.splitlines()[0]) + 1)
    assert "acc-***" in completed.stdout and "registered model demo@v1" in completed.stdout
    assert "gave up on ***" in verdict.stderr and "ValueError: bad ***" in raised.stderr
    assert "gave up on ***" in outputs[5].stdout  # runs show demo-2
    assert "ValueError: bad ***" in outputs[6].stdout  # runs show demo-3 --markdown
    assert summary["metrics"]["loss"]["last"] == 0.25


def test_user_text_that_looks_like_markup_is_printed_as_text(tmp_path, cli, home):
    root = tmp_path / "proj[/x]"  # the manifest's path, printed in messages
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(
        textwrap.dedent("""\
        import os
        for i in range(4):
            print(f"acc=0.{i}", flush=True)
        os.makedirs("outputs/m[", exist_ok=True)
        open("outputs/m[/x]", "w").write("m")  # model.path
        raise ValueError("bad token [/INST]")
        """)
    )
    (root / "tftrain.yml").write_text(
        "name: demo\nsource_directory: src\nentry_script: train.py\n"
        "model:\n  path: 'outputs/m[/x]'\n"
        "metrics:\n  regex:\n    'acc[/x]': 'acc=([0-9.]+)'\n"
    )
    result = cli("run", "-f", str(root / "tftrain.yml"), timeout=120)
    assert result.returncode == 10, result.stdout[-3000:] + result.stderr
    assert "MarkupError" not in result.stdout + result.stderr
    run = home / "runs/demo-1"
    assert (run / "workdir/logs/0.log").read_text().startswith("acc=0.0\nacc=0.1\nacc=0.2\nacc=0.3\n")
    record = json.loads((run / "run.json").read_text())
    assert "bad token [/INST]" in record["message"]
    assert record["metrics"]["metrics"]["acc[/x]"]["count"] == 4
    assert "bad token [/INST]" in (run / "summary.md").read_text()
    assert "acc[/x]=0" in result.stdout and "outputs/m[/x]" in result.stdout
    for args, shows in (
        (["runs"], "[/"),
        (["runs", "show", "demo-1"], "bad token [/INST]"),
        (["runs", "show", "latest", "--markdown"], "bad token [/INST]"),
        (["metrics", "1"], "acc[/x]"),
    ):
        shown = cli(*args)
        assert shown.returncode == 0, (args, shown.stdout + shown.stderr)
        assert shows in shown.stdout, (args, shown.stdout)
