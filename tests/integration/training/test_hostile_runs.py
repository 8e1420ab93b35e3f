"""Hostile manifests and scripts through the real CLI (validate, then run): each is refused with one
line and its exit code, or runs to an honest end, and nothing is written outside the project and
TFTRAIN_HOME."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from conftest import GATE_OFF
from hostile import assert_clean, assert_refused, nothing_written_outside

from runner.errors import ManifestError, TrainingFailed

pytestmark = pytest.mark.integration


def _write(root: Path, manifest: str, files: dict[str, str] | None = None) -> Path:
    (root / "src").mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"train.py": "print('hello')\n"}).items():
        (root / "src" / name).write_text(textwrap.dedent(text))
    path = root / "tftrain.yml"
    path.write_text(textwrap.dedent(manifest))
    return path


BASE = "name: demo\nsource_directory: src\n"

# (id, manifest after BASE, what the one error line names)
REFUSED = [
    (
        "billion-laughs",
        """
        entry_script: train.py
        script_params:
          a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
          b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
          c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
          d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
          e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
          f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
          g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
          h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
          i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
        """,
        "tftrain.yml",
    ),
    ("recursive-alias", "entry_script: train.py\nscript_params: &a {--x: *a}\n", "tftrain.yml"),
    ("deep-nesting", "entry_script: train.py\nscript_params: {--x: " + "[" * 600 + "]" * 600 + "}\n", "tftrain.yml"),
    ("nul-in-env", 'entry_script: train.py\nenvironment_variables: {X: "a\\0b"}\n', "environment_variables"),
    ("nul-in-param", 'entry_script: train.py\nscript_params: {--x: "a\\0b"}\n', "script_params"),
    ("nul-in-entry", 'entry_script: "train\\0.py"\n', "entry_script"),
    ("bool-as-seconds", "entry_script: train.py\nmax_run_duration_seconds: true\n", "max_run_duration_seconds"),
    ("string-as-bool", "entry_script: train.py\nuse_gpu: 'yes'\n", "use_gpu"),
    ("rank-that-is-no-rank", "entry_script: train.py\nmetrics: {ranks: [5]}\n", "metrics.ranks"),
    ("requirements-outside", "entry_script: train.py\npip_requirements_file: /etc/hostname\n", "pip_requirements_file"),
]


@pytest.mark.parametrize("case, manifest, names", REFUSED, ids=[case[0] for case in REFUSED])
def test_hostile_manifest_is_refused_by_validate_and_run(case, manifest, names, tmp_path, home, cli):
    path = _write(tmp_path / "project", BASE + textwrap.dedent(manifest))
    with nothing_written_outside(tmp_path, home):
        for command in ("validate", "run"):
            result = cli(command, "-f", str(path), timeout=60)
            assert_refused(result, ManifestError, names)
    assert not (home / "runs").exists()  # refused before a run was recorded


def test_outputs_dir_through_a_symlink_out_of_the_source_is_refused(tmp_path, home, cli):
    outside = tmp_path / "outside"
    outside.mkdir()
    path = _write(
        tmp_path / "project", BASE + "entry_script: train.py\noutputs_dir: sub/out\nmodel: {path: sub/out/model}\n"
    )
    (path.parent / "src" / "sub").symlink_to(outside, target_is_directory=True)
    with nothing_written_outside(tmp_path, home):
        for command in ("validate", "run"):
            assert_refused(cli(command, "-f", str(path), timeout=60), ManifestError, "outputs_dir")
    assert list(outside.iterdir()) == []


def test_an_entry_script_named_like_an_interpreter_option_runs_as_a_script(tmp_path, home, cli):
    files = {"-c": "print('the file named -c ran')\n"}
    manifest = BASE + "entry_script: -c\nscript_params:\n  \"import os; open('INJECTED', 'w')\": true\n"
    path = _write(tmp_path / "project", manifest, files)
    result = cli("run", "-f", str(path), timeout=120)
    assert_clean(result)
    assert "the file named -c ran" in result.stdout
    assert not list(tmp_path.rglob("INJECTED")) and not list(Path.cwd().glob("INJECTED"))


def test_markup_in_the_scripts_error_is_printed_as_text(tmp_path, home, cli):
    script = (
        "import time\nfor step in range(3):\n    print(f'loss={1 / (step + 1)}', flush=True)\n    time.sleep(0.6)\n"
        "raise ValueError('bad token [/INST] and [bold]x[/bold]')\n"
    )
    manifest = BASE + "entry_script: train.py\nmetrics:\n  regex:\n    '[/x]': 'loss=(?P<value>[0-9.]+)'\n"
    path = _write(tmp_path / "project", manifest, {"train.py": script})
    result = cli("run", "-f", str(path), timeout=120)
    line = assert_refused(result, TrainingFailed, "[/INST]")
    assert "bad token [/INST]" in line
    run_dir = next((home / "runs").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["status"] == "Failed"
    assert (run_dir / "summary.md").exists()
    assert (run_dir / "workdir" / "logs" / "0.log").read_text().count("loss=") == 3  # the pump lived on
    assert json.loads((run_dir / "metrics.json").read_text())["metrics"]["[/x]"]["last"] == pytest.approx(1 / 3)
    for args in (("runs",), ("runs", "show", "latest")):
        shown = cli(*args, timeout=60)
        assert_clean(shown)
        assert "[/INST]" in shown.stdout


BAD_OUTPUTS = """
import os
model = "outputs/model"
os.makedirs(model + "/variables", exist_ok=True)
open(model + "/saved_model.pb", "w").write("graph")
open(model + "/variables/variables.index", "w").write("index")
os.mkfifo(model + "/a-fifo")
os.symlink("/nonexistent/target", model + "/dangling")
os.symlink("loop", model + "/loop")
os.symlink("/etc/hostname", model + "/hostname")
os.mkdir(model + "/locked")
open(model + "/locked/x", "w").write("x")
os.chmod(model + "/locked", 0)
print("wrote the model")
"""


def test_odd_entries_under_the_model_are_skipped_and_the_rest_registered(tmp_path, home, cli):
    path = _write(
        tmp_path / "project", BASE + "entry_script: train.py\n" + GATE_OFF, {"train.py": BAD_OUTPUTS}
    )  # a stand-in model
    with nothing_written_outside(tmp_path, home):
        result = cli("run", "-f", str(path), timeout=120)
    assert_clean(result)
    assert "registered model demo@v1" in result.stdout
    assert "skipped" in result.stdout and "a-fifo" in result.stdout
    run_dir = next((home / "runs").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["status"] == "Completed"
    version = home / "models" / "demo" / "v1"
    kept = sorted(str(p.relative_to(version / "model")) for p in (version / "model").rglob("*"))
    assert "saved_model.pb" in kept and "variables/variables.index" in kept
    for name in ("a-fifo", "dangling", "loop", "hostname"):
        assert name not in kept
    assert all(not p.is_symlink() for p in (version / "model").rglob("*"))
    os.chmod(run_dir / "workdir" / "outputs" / "model" / "locked", 0o700)  # let pytest clean up
