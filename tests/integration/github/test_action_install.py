"""The action's install step (scripts/install-action): a virtualenv built once per action source,
Python and extras in the runner's tool cache, checked before every reuse. The action's copy here
declares no dependencies, so a build takes seconds; bench/install.py measures the real ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

LINE = re.compile(
    r"^tftrain \S+: (built|reused) (\S+)(?: \(extras: (\S+)\))?(?: with (uv|pip))? in ([0-9.]+) s$", re.MULTILINE
)


def action_copy(repo: Path, where: Path) -> Path:
    where.mkdir(parents=True)
    shutil.copytree(repo / "runner", where / "runner", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(repo / "templates", where / "templates")
    shutil.copytree(repo / "scripts", where / "scripts")
    shutil.copy(repo / "README.md", where / "README.md")
    pyproject = (repo / "pyproject.toml").read_text()
    pyproject = re.sub(r"(?ms)^dependencies = \[.*?^\]", "dependencies = []", pyproject)
    (where / "pyproject.toml").write_text(re.sub(r"(?m)^(s3|sweep) = .*$", r"\1 = []", pyproject))
    return where


def install(action: Path, tmp_path: Path, **env: str) -> tuple[str, Path, float, str]:
    """Run the install step as action.yml does; its verb, the venv, the seconds it took and the
    installer (uv or pip) when it built."""
    run_env = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(action),
        "INPUT_PYTHON": sys.executable,
        "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"),
        "RUNNER_TEMP": str(tmp_path / "temp"),
        **env,
    }
    (tmp_path / "temp").mkdir(exist_ok=True)
    started = time.monotonic()
    result = subprocess.run(
        [str(action / "scripts" / "install-action")], env=run_env, capture_output=True, text=True, timeout=300
    )
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    (match,) = LINE.findall(result.stdout)
    assert result.stdout.strip().splitlines()[-1].startswith("tftrain ")  # the one line is the last
    return match[0], Path(match[1]), seconds, match[3]


@pytest.fixture
def action(repo, tmp_path) -> Path:
    return action_copy(repo, tmp_path / "action")


def test_a_cold_cache_builds_and_the_next_job_reuses_it(action, tmp_path):
    verb, venv, cold, _ = install(action, tmp_path)
    assert verb == "built" and venv.parent == tmp_path / "tool-cache" / "tf-train-action"
    assert (tmp_path / "temp" / "tftrain-venv").resolve() == venv.resolve()  # what the later steps call
    assert (venv / ".tftrain-ready").exists()

    site = next(venv.glob("lib/python*/site-packages"))
    before = {p.name for p in site.iterdir()}
    verb, again, warm, _ = install(action, tmp_path)
    assert (verb, again) == ("reused", venv)
    assert {p.name for p in site.iterdir()} == before  # nothing installed
    assert warm < cold / 3, (warm, cold)


def test_a_damaged_cache_is_rebuilt_never_used(action, tmp_path):
    _, venv, _, _ = install(action, tmp_path)
    (venv / ".tftrain-ready").unlink()  # a job killed in the middle of its build
    assert install(action, tmp_path)[:2] == ("built", venv)
    # The marker is there but the venv is broken (PYTHONPATH, here the checkout, must not hide it).
    (next(venv.glob("lib/python*/site-packages")) / "runner" / "__init__.py").write_text("raise SystemExit(3)\n")
    assert install(action, tmp_path)[:2] == ("built", venv)
    assert install(action, tmp_path)[0] == "reused"


def test_another_source_or_extras_gets_its_own_venv(action, tmp_path):
    _, first, _, how = install(action, tmp_path)
    assert how == "uv"  # fetched into the tool cache by this first build (PyPI is reachable here)
    version = action / "runner" / "__init__.py"
    version.write_text(version.read_text().replace('__version__ = "', '__version__ = "9'))
    verb, second, _, how = install(action, tmp_path)
    assert how == "uv"  # the kept one
    assert verb == "built" and second != first and (first / ".tftrain-ready").exists()

    verb, third, _, _ = install(action, tmp_path, INPUT_S3_BUCKET="models")  # s3-bucket adds the s3 extra
    assert verb == "built" and third not in (first, second)
    assert install(action, tmp_path, INPUT_EXTRAS="s3")[:2] == ("reused", third)

    manifest = tmp_path / "tftrain.yml"
    manifest.write_text("name: m\nentry_script: train.py\nsweep:\n  search_space: {}\n")
    verb, fourth, _, _ = install(
        action, tmp_path, INPUT_MANIFEST=str(manifest)
    )  # a sweep: section adds the sweep extra
    assert verb == "built" and fourth not in (first, second, third)
    assert install(action, tmp_path, INPUT_EXTRAS="sweep")[:2] == ("reused", fourth)


def test_two_jobs_installing_at_once_build_once(action, tmp_path):
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: install(action, tmp_path, TFTRAIN_NO_UV="1"), range(2)))
    assert sorted((verb, how) for verb, _, _, how in results) == [("built", "pip"), ("reused", "")]  # one waited
    assert results[0][1] == results[1][1]
    assert install(action, tmp_path)[0] == "reused"


def test_extras_are_names_not_shell(action, tmp_path):
    run_env = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(action),
        "INPUT_PYTHON": sys.executable,
        "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"),
        "INPUT_EXTRAS": "s3]; touch x; [",
    }
    result = subprocess.run(
        [str(action / "scripts" / "install-action")], env=run_env, cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and "is not a list of extras" in result.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "tool-cache").exists()


def test_an_interpreter_that_is_not_there_is_one_line(action, tmp_path):
    run_env = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(action),
        "INPUT_PYTHON": str(tmp_path / "no-python"),
        "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"),
    }
    result = subprocess.run(
        [str(action / "scripts" / "install-action")], env=run_env, cwd=tmp_path, capture_output=True, text=True
    )
    assert (
        result.returncode == 2
        and result.stderr == f"::error::python: '{tmp_path / 'no-python'}' is no interpreter on this runner\n"
    )
    assert not (tmp_path / "tool-cache").exists()
