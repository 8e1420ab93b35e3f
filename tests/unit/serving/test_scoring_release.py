"""A scoring script carried by a GitHub release (runner.serving.scoring.release): packed from the
run's serving/scoring/ as scoring.tar.gz, read back into the version directory's scoring/ by
runner.serving.refs, and every hostile archive or listing refused in one line with nothing left."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest
from hostile_archives import archive_bytes, directory, entry
from test_refs import Release

from runner.errors import PublishError, RegistryError
from runner.history.packing import pack
from runner.serving.refs import fetch_serving_assets
from runner.serving.scoring.release import SCORING_ASSET, kept_files, pack_scoring, unpack_scoring
from runner.serving.scoring.script import recorded
from runner.settings import ArchiveLimits

SCRIPT = b"def init():\n    pass\n\ndef run(raw):\n    return [0]\n"
SAMPLE = b'{"data": [[0.0]]}'
ANSWER = b"[0]"
GATED = {
    "tensorflow": "2.17.1",
    "format": "saved_model",
    "sample": "2 rows",
    "signatures": {},
    "onnx": None,
}  # what the gate records besides


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serving_json(script: str = "score.py", **scoring) -> bytes:
    recorded = {
        "script": script,
        "sha256": sha(SCRIPT),
        "sample_request": sha(SAMPLE),
        "answer": sha(ANSWER),
        "packages": [],
        "auth": False,
        "layout": "directory",
        **scoring,
    }
    return json.dumps({**GATED, "scoring": recorded}).encode()


def run_serving(run: Path, extra: dict[str, bytes] | None = None) -> Path:
    """A run's serving/ as the gate leaves it for a scoring script."""
    serving = run / "serving"
    (serving / "scoring").mkdir(parents=True)
    (serving / "serving.json").write_bytes(serving_json())
    for name, data in {
        "score.py": SCRIPT,
        "sample-request.json": SAMPLE,
        "answer.json": ANSWER,
        **(extra or {}),
    }.items():
        (serving / "scoring" / name).write_bytes(data)
    return serving


def scoring_archive(members=None) -> bytes:
    return archive_bytes(
        members
        if members is not None
        else [entry("score.py", SCRIPT), entry("sample-request.json", SAMPLE), entry("answer.json", ANSWER)]
    )


def fetch(
    root: Path,
    archive: bytes | None,
    serving: bytes | None = None,
    limits: ArchiveLimits = ArchiveLimits(),
    swap: bytes | None = None,
) -> None:
    assets = {"serving.json": serving or serving_json(), "serving-sample.npz": b"npz"}
    if archive is not None:
        assets[SCORING_ASSET] = archive
    release = Release(assets)
    if swap is not None:
        next(asset for asset in release.assets if asset.name == SCORING_ASSET).content = swap
    root.mkdir()
    fetch_serving_assets(release, root, limits)


def left(tmp_path: Path) -> list[str]:
    return sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))


def test_the_run_s_scoring_files_round_trip_through_the_release_asset(tmp_path):
    serving = run_serving(tmp_path / "run", extra={"stray.txt": b"not named by serving.json"})
    digest = pack_scoring(serving, tmp_path / SCORING_ASSET)
    assert digest == sha((tmp_path / SCORING_ASSET).read_bytes())
    with tarfile.open(tmp_path / SCORING_ASSET) as archive:
        assert sorted(archive.getnames()) == [
            "answer.json",
            "sample-request.json",
            "score.py",
        ]  # the stray file stays behind

    fetch(tmp_path / "version", (tmp_path / SCORING_ASSET).read_bytes())
    scoring = tmp_path / "version" / "scoring"
    assert {p.name: p.read_bytes() for p in scoring.iterdir()} == {
        "score.py": SCRIPT,
        "sample-request.json": SAMPLE,
        "answer.json": ANSWER,
    }
    assert recorded(tmp_path / "version")["script"] == "score.py"
    assert not (tmp_path / "version" / SCORING_ASSET).exists()  # the download is not kept


def test_only_the_script_when_no_sample_was_recorded(tmp_path):
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "score.py").write_bytes(SCRIPT)
    pack(tmp_path / "only", tmp_path / "a.tar.gz")
    fetch(tmp_path / "version", (tmp_path / "a.tar.gz").read_bytes(), serving_json(sample_request=None, answer=None))
    assert sorted(p.name for p in (tmp_path / "version" / "scoring").iterdir()) == ["score.py"]


def test_a_version_without_a_scoring_script_has_no_asset(tmp_path):
    serving = tmp_path / "run" / "serving"
    serving.mkdir(parents=True)
    (serving / "serving.json").write_text(json.dumps({"tensorflow": "2.17.1"}))
    assert pack_scoring(serving, tmp_path / SCORING_ASSET) is None and not (tmp_path / SCORING_ASSET).exists()
    fetch(tmp_path / "version", scoring_archive(), serving=b'{"tensorflow": "2.17.1"}')  # present, but not read
    assert not (tmp_path / "version" / "scoring").exists()


def test_publishing_refuses_a_missing_script(tmp_path):
    serving = run_serving(tmp_path / "run")
    (serving / "scoring" / "score.py").unlink()
    with pytest.raises(PublishError, match="score.py is missing: the run's scoring script cannot be published"):
        pack_scoring(serving, tmp_path / SCORING_ASSET)


HOSTILE = {
    "a symlink": (
        [entry("score.py", type=tarfile.SYMTYPE, link="/etc/passwd")],
        RegistryError,
        "refusing to extract 'score.py': a symlink (to '/etc/passwd')",
    ),
    "a hardlink": (
        [entry("score.py", type=tarfile.LNKTYPE, link="../x")],
        RegistryError,
        "refusing to extract 'score.py': a hardlink (to '../x')",
    ),
    "a parent name": (
        [entry("../score.py", SCRIPT)],
        RegistryError,
        "refusing to extract '../score.py': it leaves the target directory",
    ),
    "an absolute name": (
        [entry("/tmp/score.py", SCRIPT)],
        RegistryError,
        "refusing to extract '/tmp/score.py': an absolute path",
    ),
    "another name": (
        [entry("score.py", SCRIPT), entry("evil.py", b"x")],
        RegistryError,
        "refusing 'evil.py': serving.json names",
    ),
    "a directory": ([entry("score.py", SCRIPT), directory("sub")], RegistryError, "refusing 'sub': serving.json names"),
    "too many members": ([entry(f"f{i}", b"x") for i in range(6)], RegistryError, "more than 4 entries"),
    "a script changed": (
        [
            entry("score.py", b"import os\nos.system('x')\n"),
            entry("sample-request.json", SAMPLE),
            entry("answer.json", ANSWER),
        ],
        PublishError,
        "score.py does not match the sha256 serving.json records for it",
    ),
    "the script missing": (
        [entry("sample-request.json", SAMPLE), entry("answer.json", ANSWER)],
        RegistryError,
        "score.py is missing",
    ),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_scoring_archives_are_refused_and_leave_nothing(tmp_path, case):
    members, error, said = HOSTILE[case]
    with pytest.raises(error, match=f"^{SCORING_ASSET} of digits-v2: .*") as raised:
        fetch(tmp_path / "version", scoring_archive(members))
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert left(tmp_path) == [
        "version",
        "version/serving",
        "version/serving/sample.npz",
        "version/serving/serving.json",
    ]


def test_a_member_claiming_more_than_the_limit_is_refused_before_it_is_read(tmp_path):
    huge, _ = entry("score.py", b"")
    huge.size = 65 << 20  # claimed in the header; no data follows
    raw = tarfile.TarInfo.tobuf(huge, tarfile.PAX_FORMAT) + b"\0" * 1024
    import gzip

    with pytest.raises(RegistryError, match=r"refusing to extract 'score.py': more than 67108864 bytes in all"):
        fetch(tmp_path / "version", gzip.compress(raw, mtime=0))
    with pytest.raises(RegistryError, match="more than 10 bytes in all"):  # the user's own limit, when lower
        fetch(tmp_path / "again", scoring_archive(), limits=ArchiveLimits(max_bytes=10))
    assert not (tmp_path / "version" / "scoring").exists() and not (tmp_path / "again" / "scoring").exists()


def test_an_asset_that_does_not_match_sha256sums_is_refused(tmp_path):
    with pytest.raises(PublishError, match=f"^{SCORING_ASSET} of digits-v2 does not match its SHA256SUMS$"):
        fetch(tmp_path / "version", scoring_archive(), swap=scoring_archive([entry("score.py", b"swapped")]))
    assert left(tmp_path) == [
        "version",
        "version/serving",
        "version/serving/sample.npz",
        "version/serving/serving.json",
    ]


def test_a_release_whose_serving_json_names_a_script_needs_the_asset(tmp_path):
    with pytest.raises(
        PublishError,
        match=f"release digits-v2 has no {SCORING_ASSET}, yet its serving.json names the scoring script 'score.py'",
    ):
        fetch(tmp_path / "version", None)


@pytest.mark.parametrize(
    "script", ["../score.py", "/etc/score.py", "..", "", "sample-request.json", "a\\b.py", "a\nb.py"]
)
def test_a_script_name_that_is_no_file_name_is_refused(tmp_path, script):
    with pytest.raises(ValueError, match="is not a file name"):
        kept_files({"script": script, "sha256": "0" * 64})
    with pytest.raises(PublishError, match="is not a file name"):
        unpack_scoring(tmp_path / "never-read.tar.gz", tmp_path, {"script": script}, SCORING_ASSET, ArchiveLimits())
    assert left(tmp_path) == []


def built_run(root: Path, scoring: bool) -> Path:
    """A finished run's directory as build_assets reads it: model, logs, metrics, lock, serving/."""
    paths_root = root / "runs" / "demo-1"
    (paths_root / "workdir" / "outputs" / "model").mkdir(parents=True)
    (paths_root / "workdir" / "outputs" / "model" / "saved_model.pb").write_bytes(b"graph")
    (paths_root / "workdir" / "logs").mkdir()
    (paths_root / "metrics.json").write_text("{}")
    (paths_root / "metrics.jsonl").write_text("")
    (paths_root / "manifest.lock.yml").write_text("{}\n")
    if scoring:
        run_serving(paths_root)
    else:
        (paths_root / "serving").mkdir()
        (paths_root / "serving" / "serving.json").write_text(json.dumps(GATED))
    return paths_root


@pytest.mark.parametrize("scoring", [True, False])
def test_a_release_of_a_scoring_version_carries_scoring_tar_gz(tmp_path, scoring):
    from runner.github.release_assets import SUMS, build_assets
    from runner.history.checksums import read_sums
    from runner.history.rundir import RunPaths
    from runner.manifest.model import Manifest

    manifest = Manifest.model_validate({"name": "demo", "entry_script": "train.py", "model": {"path": "outputs/model"}})
    paths = RunPaths(built_run(tmp_path, scoring))
    files = build_assets(manifest, paths, {"run_id": "demo-1"}, 1, tmp_path / "assets")
    names = {path.name for path in files}
    sums = read_sums(tmp_path / "assets" / SUMS)
    card = (tmp_path / "assets" / "MODEL_CARD.md").read_text()
    assert (SCORING_ASSET in names) is scoring and (SCORING_ASSET in sums) is scoring
    assert ("- `scoring.tar.gz`" in card) is scoring and ("Scoring script: `score.py`" in card) is scoring
    if scoring:
        assert sums[SCORING_ASSET] == sha((tmp_path / "assets" / SCORING_ASSET).read_bytes())
        fetch(
            tmp_path / "version", (tmp_path / "assets" / SCORING_ASSET).read_bytes()
        )  # read back as `serve release:` does
        assert (tmp_path / "version" / "scoring" / "score.py").read_bytes() == SCRIPT
