"""examples/keras-replay end to end: the first version replayed alone and registered; a pull request
that moves preprocessing out of the model refused by the replay (exit 33, the flipped request ids);
a refactor of the same model registered, its replay.json and requests kept in the version and the
requests written into its SavedModel as TF Serving's warmup file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from conftest import TFTRAIN
from serving_models import lasting_cache_path


def run(home, manifest, *params: str) -> subprocess.CompletedProcess:
    text = manifest.read_text()
    manifest.with_name("pr.yml").write_text(
        text.replace("  --epochs: 5\n", "  --epochs: 5\n" + "".join(f"  {p}\n" for p in params))
    )
    env = {**os.environ, "TFTRAIN_HOME": str(home), "TFTRAIN_CACHE_DIR": str(lasting_cache_path()), "COLUMNS": "200"}
    return subprocess.run(
        [TFTRAIN, "run", "-f", str(manifest.with_name("pr.yml"))], capture_output=True, text=True, env=env, timeout=1200
    )


def test_a_preprocessing_change_is_refused_and_a_refactor_passes(repo, tmp_path):
    example = tmp_path / "keras-replay"
    shutil.copytree(
        repo / "examples" / "keras-replay", example, ignore=shutil.ignore_patterns("outputs", "__pycache__")
    )
    manifest, home = example / "tftrain.yml", tmp_path / "home"
    first = run(home, manifest)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    assert "against the candidate alone (no earlier version): 200 answered" in first.stdout

    skewed = run(home, manifest, "--normalize: outside")
    assert skewed.returncode == 33, skewed.stdout[-3000:] + skewed.stderr
    [line] = [line for line in skewed.stderr.splitlines() if line.startswith("tftrain: error:")]
    assert "model not registered: the replay refused it:" in line and "below min_agreement 99.0% (e.g. rec-" in line
    report = json.loads((home / "runs" / "keras-replay-2" / "serving" / "replay.json").read_text())
    assert report["agreed"] < 190 and report["worst"] and not (home / "models" / "keras-replay" / "v2").exists()
    assert "### Replay" in (home / "runs" / "keras-replay-2" / "summary.md").read_text()

    refactor = run(home, manifest, "--style: functional")
    assert refactor.returncode == 0, refactor.stdout[-3000:] + refactor.stderr
    assert "100.0% same class" in refactor.stdout and "registered model keras-replay@v2" in refactor.stdout
    kept = home / "models" / "keras-replay" / "v2" / "serving"
    assert json.loads((kept / "replay.json").read_text())["baseline"] == "keras-replay@v1"
    assert len((kept / "replay-requests.jsonl").read_text().splitlines()) == 200
    warmup = home / "models" / "keras-replay" / "v2" / "model" / "assets.extra" / "tf_serving_warmup_requests"
    assert (
        warmup.is_file() and "assets.extra/tf_serving_warmup_requests" in (warmup.parents[2] / "SHA256SUMS").read_text()
    )
    assert not (home / "runs" / "keras-replay-3" / "replay" / "candidate").exists()  # the candidate's scratch is gone
