"""What `tftrain` loads before the user's script starts: nothing it does not need then (the
startup bench, bench/startup.py, measures the time; this holds the line on what is imported)."""

from __future__ import annotations

import subprocess
import sys

import runner

LATE = ("rich", "docker", "github", "boto3", "tensorboard", "matplotlib", "git", "jinja2", "kubernetes")


def loaded_by(statement: str) -> list[str]:
    probe = f"import sys; {statement}; print(' '.join(m for m in {LATE!r} if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()


def test_version_loads_only_the_command_table():
    assert loaded_by("import runner.cli.main") == []
    assert loaded_by("import runner") == []


def test_version_loads_no_pydantic():
    """The models are imported on the paths that validate with them, and built there (defer_build)."""
    probe = (
        "import sys\nfrom runner.cli.main import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n   "
        " pass\nprint(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == [f"tftrain {runner.__version__}", "[]"]


def test_run_loads_nothing_that_only_post_processing_or_other_targets_need():
    assert loaded_by("import runner.cli.run") == []


# imported by then, they alone took most of the time before the script's first line. pydantic is
# not among them: it validates the manifest before the script starts (bench/startup.py times it), and
# it imports importlib.metadata (its plugin loader does, before it reads PYDANTIC_DISABLE_PLUGINS);
# what the line holds there is that no package's metadata is read: no version asked for (the
# framework's, when none was set), no entry points scanned (the plugin look-up is off for tftrain)
# a manifest without a sweep: section never loads the sweep's twenty models (runner.manifest.sweep);
# an image reference is parsed for a manifest with an image, a traceback read after the script ended,
# the model copied and hashed (runner.history.checksums) after it too
NOT_BEFORE_THE_SCRIPT = (
    "jinja2",
    "rich",
    "git",
    "runner.manifest.sweep",
    "runner.manifest.sweep_rules",
    "runner.serving.imageref",
    "runner.telemetry.diagnose",
    "runner.history.checksums",
)

LAUNCH_PROBE = """
import importlib.metadata, subprocess, sys
asked = []
for name in ("version", "distribution", "files", "requires", "entry_points", "distributions"):  # pydantic's plugin scan included: off in tftrain's process
    def asking(*args, _name=name, _real=getattr(importlib.metadata, name), **kwargs):
        asked.append(_name)
        return _real(*args, **kwargs)
    setattr(importlib.metadata, name, asking)
seen = []
real_init = subprocess.Popen.__init__
def init(self, args, *rest, **kwargs):
    if not seen and "train.py" in " ".join(map(str, args if isinstance(args, (list, tuple)) else [args])):
        seen.append(sorted(name for name in {late!r} if name in sys.modules))
        print("loaded when the script started:", " ".join(seen[0]) or "-", file=sys.stderr, flush=True)
        print("package metadata asked before the script started:", " ".join(asked) or "-", file=sys.stderr, flush=True)
    real_init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = init
sys.argv = ["tftrain", "run", "-f", {manifest!r}]
from runner.cli.main import main
main()
"""


def test_the_script_starts_before_the_post_processing_modules_load(project, home):
    probe = LAUNCH_PROBE.format(late=NOT_BEFORE_THE_SCRIPT, manifest=str(project("print('first line', flush=True)\n")))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "first line" in result.stdout
    assert "loaded when the script started: -\n" in result.stderr, result.stderr
    assert "package metadata asked before the script started: -\n" in result.stderr, result.stderr


def test_a_manifest_read_before_starts_its_script_without_a_yaml_parser(project, home, tmp_path, monkeypatch):
    """The first run parses the manifest (PyYAML), the next ones take it from runner.manifest.yamlcache."""
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))  # a cache of its own: the first run parses
    probe = LAUNCH_PROBE.format(late=("yaml",), manifest=str(project("print('first line', flush=True)\n")))
    seen = []
    for _ in range(2):
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        seen.append([line for line in result.stderr.splitlines() if line.startswith("loaded when")])
    assert seen == [["loaded when the script started: yaml"], ["loaded when the script started: -"]]
