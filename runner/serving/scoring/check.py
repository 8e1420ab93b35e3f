"""The gate's step for a scoring script, in a fresh process of the model's environment
(`python -m runner.serving.model_check score ...`): the script loaded as azmlinfsrv loads it,
init() with AZUREML_MODEL_DIR and Model.get_model_path pointing at the model the run wrote, then
run() on model.serving.sample_request (without one, init() alone is checked: no request is guessed)
and its answer held to JSON. The verdict is one line with the script's FILE:LINE; the traceback
goes to the log.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import runner
from runner.serving.scoring import script as scoring_script


def check_script(script: Path, registered: Path, out: Path, name: str, sample: Path | None) -> dict:
    os.environ.update(scoring_script.model_variables(registered, name, None))
    here = Path(runner.__file__).resolve().parents[1]  # the directory that holds `runner`
    sys.path.insert(0, str(scoring_script.shims(here)))
    sys.path.insert(1, str(script.parent))  # azmlinfsrv puts the script's directory on the path
    try:
        module = scoring_script.load(script)
    except scoring_script.ScriptError as exc:
        return {"ok": False, "step": "score-load", "error": f"scoring script {exc}"}
    started = time.perf_counter()
    try:
        module.init()
    except BaseException as exc:
        traceback.print_exc()
        return {
            "ok": False,
            "step": "score-init",
            "error": f"scoring script {script.name}: init() raised {scoring_script.told(exc, script)}",
        }
    result = {"ok": True, "init_seconds": round(time.perf_counter() - started, 3), "script": script.name}
    if sample is None:
        return {**result, "run": "no model.serving.sample_request: run() not called"}
    body = sample.read_text(encoding="utf-8")
    try:
        answer = module.run(body)
    except BaseException as exc:
        traceback.print_exc()
        return {
            "ok": False,
            "step": "score-run",
            "error": (
                f"scoring script {script.name}: run() on model.serving.sample_request raised"
                f" {scoring_script.told(exc, script)}"
            ),
        }
    problem = scoring_script.not_json(answer)
    if problem:
        return {"ok": False, "step": "score-run", "error": f"scoring script {script.name}: {problem}"}
    (out / "score-answer.json").write_text(json.dumps(answer) + "\n")
    return {**result, "run": "run() answered model.serving.sample_request with JSON"}
