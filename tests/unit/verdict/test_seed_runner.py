"""SeedRunner without training: every seed ends with an outcome, a tftrain defect in one included."""

from __future__ import annotations

import io
from pathlib import Path

from runner.errors import FatalError
from runner.history.states import RunStatus
from runner.manifest import LoadedManifest
from runner.manifest.model import Manifest
from runner.settings import Settings
from runner.telemetry.logger import Logger
from runner.training.pipeline import RunResult
from runner.verdict import seeds


def test_a_seed_broken_by_tftrain_says_so_in_one_line_and_the_others_run(tmp_path: Path, monkeypatch):
    def run_with_retry(loaded, logger, settings, home, watch):
        seed = int(loaded.manifest.environment_variables[seeds.VARIABLE])
        if seed == 2:
            raise OSError(28, "No space left on device")
        return RunResult(f"demo-{seed + 1}", RunStatus.COMPLETED, 0, None, tmp_path, None, {})

    monkeypatch.setattr(seeds, "run_with_retry", run_with_retry)
    loaded = LoadedManifest(Manifest(name="demo", entry_script="train.py"), tmp_path / "tftrain.yml", ())
    console = io.StringIO()
    runner = seeds.SeedRunner(loaded, Logger(console), Settings(), tmp_path / "home", {}, [None, None])
    outcomes = runner.run(4)

    assert [o.seed for o in outcomes] == [0, 1, 2, 3]
    assert [o.completed for o in outcomes] == [True, True, False, True]
    assert isinstance(outcomes[2].error, FatalError)
    said = str(outcomes[2].error)
    assert said.startswith("seed 2 stopped on an error of tftrain's: OSError: [Errno 28] No space left on device")
    trace = Path(said.rsplit("(trace: ", 1)[1].rstrip(")"))
    assert "Traceback" in trace.read_text() and trace.parent == tmp_path / "home" / seeds.CONSOLES
    assert said in console.getvalue() and "Traceback" not in console.getvalue()
