"""The run's lineage: git asked through its executable, recorded once the training has started."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import yaml

from runner.environments.prepared import Environment
from runner.history.rundir import RunPaths
from runner.manifest import load_manifest
from runner.training.gitinfo import git_info
from runner.training.lineage import Lineage

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def git(folder: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=folder, check=True, capture_output=True, text=True).stdout.strip()


def checkout(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text("print('hi')\n")
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", "-A")
    git(folder, "commit", "-qm", "one")
    return folder


def test_a_folder_outside_any_checkout_has_no_lineage(tmp_path):
    assert git_info(tmp_path) == {}


def test_a_checkout_without_a_commit_is_dirty_and_has_no_commit(tmp_path):
    git(tmp_path, "init", "-q")
    assert git_info(tmp_path) == {"repo": str(tmp_path), "commit": None, "branch": None, "tags": [], "dirty": True}


def test_commit_branch_and_tags_of_a_clean_checkout(tmp_path):
    folder = checkout(tmp_path / "repo")
    git(folder, "tag", "v1")
    git(folder, "tag", "-a", "v1.0", "-m", "annotated")  # an annotated tag points at the commit through its tag object
    (folder / "sub").mkdir()
    info = git_info(folder / "sub")
    assert info == {
        "repo": str(folder),
        "commit": git(folder, "rev-parse", "HEAD"),
        "branch": "main",
        "tags": ["v1", "v1.0"],
        "dirty": False,
    }


def test_untracked_and_changed_files_make_it_dirty(tmp_path):
    folder = checkout(tmp_path / "repo")
    (folder / "new.py").write_text("")
    assert git_info(folder)["dirty"] is True
    (folder / "new.py").unlink()
    (folder / "train.py").write_text("changed\n")
    assert git_info(folder)["dirty"] is True


def test_a_detached_head_has_no_branch(tmp_path):
    folder = checkout(tmp_path / "repo")
    git(folder, "checkout", "-q", "--detach")
    info = git_info(folder)
    assert info["branch"] is None and info["commit"] == git(folder, "rev-parse", "HEAD") and info["dirty"] is False


def test_without_a_git_executable_there_is_no_lineage(tmp_path, monkeypatch):
    folder = checkout(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert git_info(folder) == {}


def test_a_run_records_the_commit_in_its_lock_and_record(project, cli, home):
    path = project()
    checkout(path.parent)
    assert cli("run", "-f", str(path)).returncode == 0
    commit = git(path.parent, "rev-parse", "HEAD")
    lock = yaml.safe_load((home / "runs/demo-1/manifest.lock.yml").read_text())
    assert lock["git"]["commit"] == commit and lock["git"]["branch"] == "main"
    assert lock["environment"]["packages"]  # the local environment's packages, listed while the training ran
    assert "framework_version" in lock["environment"]
    assert commit[:10] in cli("runs").stdout


def test_a_lock_that_cannot_be_written_is_a_warning_and_the_lineage_is_kept(project, tmp_path):
    manifest = load_manifest(project())
    checkout(manifest.source_dir)
    paths = RunPaths.for_run(tmp_path / "home", "demo-1", manifest.manifest)
    paths.lock.mkdir(parents=True)  # in the way: the lock cannot be written
    kept, warnings = [], []
    env = Environment("python", "here", reused=False, isolated=False)
    lineage = Lineage(
        manifest, paths, env, SimpleNamespace(to_dict=dict), {}, keep_git=kept.append, warn=warnings.append
    )
    lineage.record()
    lineage.record()  # once: supervise calls it when the plan started, the pipeline again at the end
    assert kept == [lineage.git] and lineage.git["commit"] == git(manifest.source_dir, "rev-parse", "HEAD")
    assert warnings == [f"{paths.lock}: not written: Is a directory"]
