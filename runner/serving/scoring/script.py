"""A scoring script as Azure's inference server calls it: loaded from its file, init() once, then
run(raw_data) with the request body as a string (azmlinfsrv's undecorated run). What the gate
(runner.serving.scoring.check) and the server (runner.serving.scoring.server) agree on: which
exceptions from run() mean the request was wrong (400) and which the script or model failed (500),
and how a failure is told in one line with the script's FILE:LINE. Standard library only.
"""

from __future__ import annotations

import importlib.util
import json
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.history.untrusted import optional_mapping

# run() raising one of these is the script rejecting the request (a body it cannot parse, a missing
# key, a shape that does not fit): 400. Anything else is the script's or the model's fault: 500.
REJECTED = (ValueError, KeyError, IndexError, TypeError)
REJECTED_NAMES = {
    "InvalidArgumentError"
}  # TensorFlow's own word for an input that does not fit the model (not imported here)
MAX_LINE = 300


def rejected(exc: BaseException) -> bool:
    """run() raised because of the request (400), not because the script or the model failed (500)."""
    return isinstance(exc, REJECTED) or any(cls.__name__ in REJECTED_NAMES for cls in type(exc).__mro__)


class ScriptError(Exception):
    """A script that does not load or keeps no init()/run(): one line, FILE:LINE where known."""


def load(script: Path) -> ModuleType:
    """The script's module, as azmlinfsrv loads it (`entry_module` from its file); ScriptError
    when it raises on import or lacks init() or run()."""
    try:
        spec = importlib.util.spec_from_file_location("entry_module", script)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:  # SystemExit from a script is a failed import too
        raise ScriptError(f"importing {script.name} failed: {told(exc, script)}") from None
    for name in ("init", "run"):
        if not callable(getattr(module, name, None)):
            raise ScriptError(
                f"{script.name} defines no {name}() function: Azure's entry script contract is init() and run(raw_data)"
            )
    return module


def told(exc: BaseException, script: Path) -> str:
    """`Type: message (score.py:LINE)`: the exception's last line and the deepest frame in the script."""
    last = (traceback.format_exception_only(type(exc), exc)[-1].strip() or type(exc).__name__).splitlines()[-1]
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).name == script.name:
            where = f"{script.name}:{frame.lineno}"
    if where is None and isinstance(exc, SyntaxError) and exc.lineno:
        where = f"{script.name}:{exc.lineno}"
    text = f"{last} ({where})" if where else last
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def not_json(value: Any) -> str | None:
    """Why run()'s answer is no JSON document (azmlinfsrv answers it with json.dumps), or None."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return (
            f"run() returned {type(value).__name__}, which JSON cannot hold"
            f" ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
        )
    return None


def model_variables(registered: Path, name: str, version: int | None) -> dict[str, str]:
    """What Model.get_model_path (runner.compat.model_path) and a script reading AZUREML_MODEL_DIR
    find: the directory holding the registered model (the model itself when it is a directory)."""
    directory = registered if registered.is_dir() else registered.parent
    variables = {"AZUREML_MODEL_DIR": str(directory), "TFTRAIN_MODEL_NAME": name, "TFTRAIN_MODEL_PATH": str(registered)}
    if version is not None:
        variables["TFTRAIN_MODEL_VERSION"] = str(version)
    return variables


def shims(pythonpath_root: Path) -> Path:
    """tftrain's azureml stand-in, below the directory that holds `runner`."""
    return pythonpath_root / "runner" / "compat" / "shims"


def recorded(root: Path) -> dict | None:
    """serving/serving.json's "scoring" (what the gate checked and registration kept, with its
    sha256 in version.json), or None for a version registered without a scoring script."""
    serving = optional_mapping(root / "serving" / "serving.json")
    return scoring_of(serving) if serving else None


def scoring_of(serving: object) -> dict | None:
    """serving.json's document's "scoring" when it names a script (recorded's rule), else None."""
    scoring = serving.get("scoring") if isinstance(serving, dict) else None
    return scoring if isinstance(scoring, dict) and isinstance(scoring.get("script"), str) else None


def packages_of(scoring: dict) -> tuple[str, ...]:
    """The packages a version recorded for its scoring environment; ValueError for anything pip
    would read as an option or a second line (serving.json can come from a release anyone wrote)."""
    packages = scoring.get("packages") or []
    if not isinstance(packages, list):
        raise ValueError("serving.json's scoring.packages is not a list")
    for package in packages:
        if (
            not isinstance(package, str)
            or not package.strip()
            or package.lstrip().startswith("-")
            or not package.isprintable()
        ):
            raise ValueError(f"serving.json's scoring.packages holds {str(package)[:80]!r}, which is not a package")
    return tuple(packages)
