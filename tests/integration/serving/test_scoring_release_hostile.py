"""`tftrain serve release:NAME@vN` against hostile releases of a scoring version (a server speaking
GitHub's REST protocol): a scoring.tar.gz with links, `..`, absolute names, names serving.json does
not give, too many or too large members, a script other than the one serving.json records, or an
asset that does not match SHA256SUMS. Each ends in one line and its exit code before any environment
is built, and nothing is written outside the version's own (removed) directory."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import TFTRAIN
from hostile import assert_refused
from hostile_archives import archive_bytes, entry

from runner.errors import PublishError, RegistryError

pytestmark = pytest.mark.integration

SCRIPT = b"def init():\n    pass\n\ndef run(raw):\n    return [0]\n"
SAMPLE = b'{"data": [[0.0]]}'
MODEL = archive_bytes([entry("saved_model.pb", b"graph")])


def release_assets(scoring: bytes | None, script: str = "score.py", swap: bytes | None = None) -> dict[str, bytes]:
    serving = {
        "tensorflow": "2.17.1",
        "scoring": {
            "script": script,
            "sha256": hashlib.sha256(SCRIPT).hexdigest(),
            "sample_request": hashlib.sha256(SAMPLE).hexdigest(),
            "answer": None,
            "packages": [],
            "auth": False,
            "layout": "directory",
        },
    }
    assets = {"model.tar.gz": MODEL, "serving.json": json.dumps(serving).encode()}
    if scoring is not None:
        assets["scoring.tar.gz"] = scoring
    sums = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in sorted(assets.items()))
    if swap is not None:
        assets["scoring.tar.gz"] = swap
    return {**assets, "SHA256SUMS": sums.encode()}


def claims_too_much() -> bytes:
    info, _ = entry("score.py")
    info.size = 65 << 20  # the header's claim; no data follows
    return gzip.compress(info.tobuf(tarfile.PAX_FORMAT) + b"\0" * 1024, mtime=0)


GOOD = [entry("score.py", SCRIPT), entry("sample-request.json", SAMPLE)]
CASES = {
    "symlink": (
        release_assets(archive_bytes([entry("score.py", type=tarfile.SYMTYPE, link="/etc/passwd")])),
        RegistryError,
        "refusing to extract 'score.py': a symlink",
    ),
    "parent": (
        release_assets(archive_bytes([entry("../../escaped.py", SCRIPT)])),
        RegistryError,
        "it leaves the target directory",
    ),
    "absolute": (release_assets(archive_bytes([entry("/tmp/escaped.py", SCRIPT)])), RegistryError, "an absolute path"),
    "other name": (
        release_assets(archive_bytes([*GOOD, entry("sitecustomize.py", b"import os")])),
        RegistryError,
        "refusing 'sitecustomize.py': serving.json names",
    ),
    "too many": (
        release_assets(archive_bytes([entry(f"f{i}.py", b"x") for i in range(5)])),
        RegistryError,
        "more than 3 entries",
    ),
    "too large": (release_assets(claims_too_much()), RegistryError, "more than 67108864 bytes in all"),
    "changed script": (
        release_assets(archive_bytes([entry("score.py", b"import os\n"), GOOD[1]])),
        PublishError,
        "score.py does not match the sha256 serving.json records for it",
    ),
    "not in SHA256SUMS": (
        release_assets(archive_bytes(GOOD), swap=archive_bytes([entry("score.py", b"swapped")])),
        PublishError,
        "scoring.tar.gz of evil-v1 does not match its SHA256SUMS",
    ),
    "missing": (
        release_assets(None),
        PublishError,
        "release evil-v1 has no scoring.tar.gz, yet its serving.json names the scoring script 'score.py'",
    ),
    "script name": (
        release_assets(archive_bytes(GOOD), script="../score.py"),
        PublishError,
        "scoring.script '../score.py' is not a file name",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_scoring_release_is_refused_in_one_line(home, github_api, tmp_path, case):
    assets, error, said = CASES[case]
    github_api.add_release("octo", "models", "evil-v1", assets)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {
        **os.environ,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": github_api.url,
        "GITHUB_TOKEN": "ghs_test",
        "COLUMNS": "200",
        "TMPDIR": str(scratch),
    }
    result = subprocess.run(
        [TFTRAIN, "serve", "release:evil@v1", "--port", "0"], capture_output=True, text=True, env=env, timeout=120
    )
    assert_refused(result, error, said)
    assert list(scratch.iterdir()) == []  # the version's directory is gone, and nothing was written beside it
    assert not list(tmp_path.rglob("escaped.py")) and not Path("/tmp/escaped.py").exists()
