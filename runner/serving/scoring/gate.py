"""The gate's part for a scoring script (model.serving.scoring_script): the script, its sample
request and the packages it asked for are copied into the run's serving/scoring/ (checked again:
a plain file inside the snapshot, reached through no link), init() and run() are called on the
sample in the model's environment (runner.serving.scoring.check), and what registration keeps is
described in serving.json's "scoring": the script's name and sha256, the sample's, the packages
(a conda file's pip list, read now: the version needs no conda file to be served) and auth.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Callable

import yaml

from runner.errors import ManifestError, ModelGateError
from runner.history.checksums import sha256_file
from runner.history.rundir import RunPaths
from runner.manifest import LoadedManifest
from runner.manifest.scoring_rules import file_problems
from runner.manifest.sourcepaths import read_source_text

SCORING_DIR = "scoring"
# the server and the layer replace Azure's own packages; the model's TensorFlow set decides TensorFlow
DROPPED = re.compile(
    r"^(azureml[-_.].*|azureml|tensorflow([-_].*)?|tensorflow-cpu|tensorflow-gpu|keras|tf-keras|inference-schema)$",
    re.I,
)
CONDA_ONLY = {"python", "pip", "setuptools", "wheel"}
NAME_END = re.compile(r"[\s<>=!~\[;@]")  # where a requirement's name ends (a pin, extras, a marker)


def scoring_packages(loaded: LoadedManifest) -> tuple[list[str], list[str]]:
    """(the packages the script's environment installs, those left out and why); from
    model.serving.pip_packages or the pip list (and plain conda names) of model.serving.conda_file."""
    serving = loaded.manifest.model.serving
    wanted = list(serving.pip_packages)
    if serving.conda_file:
        wanted = conda_packages(
            read_source_text(loaded.source_dir, serving.conda_file, "model.serving.conda_file"), serving.conda_file
        )
    kept, dropped = [], []
    for package in wanted:
        name = NAME_END.split(package.strip(), maxsplit=1)[0]
        (dropped if DROPPED.match(name) else kept).append(package.strip())
    return kept, dropped


def conda_packages(text: str, where: str) -> list[str]:
    """A conda environment file's packages as pip requirements: its `pip:` list as written, its
    conda packages by name (conda's `=` pins are not pip's; the model's tested set pins them)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"model.serving.conda_file {where}: not YAML ({str(exc).splitlines()[0]})") from None
    dependencies = document.get("dependencies") if isinstance(document, dict) else None
    if not isinstance(dependencies, list):
        raise ManifestError(f"model.serving.conda_file {where}: no `dependencies:` list")
    packages: list[str] = []
    for item in dependencies:
        if isinstance(item, dict) and isinstance(item.get("pip"), list):
            packages += [str(entry) for entry in item["pip"]]
        elif isinstance(item, str):
            name = NAME_END.split(item.split("::")[-1].strip(), maxsplit=1)[0]
            if name and name.lower() not in CONDA_ONLY:
                packages.append(name)
    for package in packages:
        if not package.strip() or package.lstrip().startswith("-") or not package.isprintable():
            raise ManifestError(f"model.serving.conda_file {where}: {package!r} is not a package (no pip options here)")
    return packages


def gate_scoring(
    loaded: LoadedManifest, paths: RunPaths, out: Path, probe: Callable[[list[str], Path], str], logger
) -> dict:
    """serving.json's "scoring"; ModelGateError (one line, FILE:LINE) when the script fails."""
    serving = loaded.manifest.model.serving
    problems = file_problems(loaded.manifest.model_copy(update={"source_directory": "."}), paths.workdir)
    if problems:
        key, problem = problems[0]
        raise ModelGateError(f"model.serving.{key}: {problem}")
    packages, dropped = scoring_packages(loaded)
    directory = out / SCORING_DIR
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    script = directory / Path(serving.scoring_script).name
    shutil.copyfile(paths.workdir / serving.scoring_script, script)
    sample = None
    if serving.sample_request:
        sample = directory / "sample-request.json"
        shutil.copyfile(paths.workdir / serving.sample_request, sample)
    args = [
        "score",
        str(script),
        str(paths.workdir / loaded.manifest.model.path),
        str(out),
        "--name",
        loaded.manifest.name,
    ]
    where = probe(args + (["--sample", str(sample)] if sample else []), out / "score.log")
    from runner.serving.steps import verdict

    result = verdict(out, "score", out / "score.log")
    if not result.get("ok"):
        raise ModelGateError(f"{result.get('error')} (the gate, in {where}; log: {out / 'score.log'})")
    answer = out / "score-answer.json"
    if sample is not None and answer.is_file():  # what `tftrain deploy`'s smoke test expects /score to answer
        shutil.copyfile(answer, directory / "answer.json")
    logger.info(
        f"model gate: scoring script {script.name}: init() ran in {result.get('init_seconds')} s; {result.get('run')}"
    )
    if dropped:
        logger.info(
            f"scoring environment: left out {', '.join(dropped)} (tftrain's server, azureml layer and the model's"
            " TensorFlow set replace them)"
        )
    return {
        "script": script.name,
        "sha256": sha256_file(script),
        "sample_request": sha256_file(sample) if sample else None,
        "answer": sha256_file(directory / "answer.json") if (directory / "answer.json").is_file() else None,
        "packages": packages,
        "auth": serving.auth,
        "layout": "directory" if (paths.workdir / loaded.manifest.model.path).is_dir() else "file",
    }
