from __future__ import annotations

from runner.training.snapshot import take_snapshot


def tree(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def make_source(root):
    for rel in (
        "train.py",
        "lib/util.py",
        "data/big.bin",
        "outputs/old.txt",
        "logs/old.log",
        "__pycache__/x.pyc",
        ".git/HEAD",
        "venv/pyvenv.cfg",
        "venv/lib/x.py",
        "notes.tmp",
    ):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


def test_snapshot_leaves_out_outputs_logs_and_tool_directories(tmp_path):
    source = tmp_path / "src"
    make_source(source)
    take_snapshot(source, tmp_path / "snap", exclude=("outputs", "logs"))
    assert tree(tmp_path / "snap") == ["data/big.bin", "lib/util.py", "notes.tmp", "train.py"]


def test_tftrainignore_wins_over_amlignore_and_gitignore(tmp_path):
    source = tmp_path / "src"
    make_source(source)
    (source / ".gitignore").write_text("lib/\n")
    (source / ".amlignore").write_text("notes.tmp\n")
    (source / ".tftrainignore").write_text("data/\n*.tmp\n")
    take_snapshot(source, tmp_path / "snap")
    assert tree(tmp_path / "snap") == [
        ".amlignore",
        ".gitignore",
        ".tftrainignore",
        "lib/util.py",
        "logs/old.log",
        "outputs/old.txt",
        "train.py",
    ]


def test_amlignore_then_gitignore(tmp_path):
    source = tmp_path / "src"
    make_source(source)
    (source / ".gitignore").write_text("*.tmp\n")
    take_snapshot(source, tmp_path / "snap", exclude=("outputs", "logs"))
    assert "notes.tmp" not in tree(tmp_path / "snap")
    (source / ".amlignore").write_text("data\n")
    take_snapshot(source, tmp_path / "snap2", exclude=("outputs", "logs"))
    assert tree(tmp_path / "snap2") == [".amlignore", ".gitignore", "lib/util.py", "notes.tmp", "train.py"]


def test_home_inside_the_source_is_skipped(tmp_path):
    source = tmp_path / "src"
    make_source(source)
    (source / "runs-home" / "x").mkdir(parents=True)
    (source / "runs-home" / "x" / "f").write_text("")
    take_snapshot(source, tmp_path / "snap", skip=(source / "runs-home",))
    assert not any(p.startswith("runs-home") for p in tree(tmp_path / "snap"))
