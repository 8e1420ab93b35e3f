"""An Azure ML v2 managed online deployment (YAML: code_configuration, environment, instance_type)
→ model.serving of a Draft imported from the training job (`tftrain import azureml JOB
--deployment DEPLOYMENT.yml`). Paths are read relative to the deployment's file and written
relative to the draft's source_directory; what has no equivalent goes to the report."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from runner.errors import ManifestError
from runner.importer.draft import Draft
from runner.manifest.document import YamlDocument
from runner.manifest.loading import load_yaml

SERVING = ("model", "serving")
# Azure VM sizes of online endpoints → (cores, memory, GPUs): what one replica gets
INSTANCE_TYPES = {
    "standard_ds1_v2": (1, "3584Mi", 0), "standard_ds2_v2": (2, "7Gi", 0), "standard_ds3_v2": (4, "14Gi", 0),
    "standard_ds4_v2": (8, "28Gi", 0), "standard_ds5_v2": (16, "56Gi", 0), "standard_f2s_v2": (2, "4Gi", 0),
    "standard_f4s_v2": (4, "8Gi", 0), "standard_f8s_v2": (8, "16Gi", 0), "standard_f16s_v2": (16, "32Gi", 0),
    "standard_e2s_v3": (2, "16Gi", 0), "standard_e4s_v3": (4, "32Gi", 0), "standard_e8s_v3": (8, "64Gi", 0),
    "standard_nc6s_v3": (6, "112Gi", 1), "standard_nc4as_t4_v3": (4, "28Gi", 1),
}  # fmt: skip
QUIET = {
    "$schema",
    "name",
    "endpoint_name",
    "model",
    "code_configuration",
    "environment",
    "instance_type",
    "description",
    "tags",
}


def apply_deployment(draft: Draft, path: Path, manifest_dir: Path) -> None:
    """`manifest_dir`: resolved. ManifestError for a file that is no online deployment."""
    if not path.is_file():
        raise ManifestError(f"--deployment {path}: no such file")
    doc = load_yaml(path)
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("code_configuration"), dict):
        raise ManifestError(f"--deployment {path}: not an Azure ML online deployment (no code_configuration: key)")
    label = os.path.relpath(path.resolve(), manifest_dir)
    doc = YamlDocument(PurePosixPath(label), data, doc.lines)
    here = path.resolve().parent
    source = draft.get("source_directory")
    source_dir = (manifest_dir / source).resolve() if isinstance(source, str) else None
    code = data["code_configuration"]
    folder, script = code.get("code", "."), code.get("scoring_script")
    if (
        isinstance(script, str)
        and isinstance(folder, str)
        and "://" not in folder
        and not folder.startswith("azureml:")
    ):
        _put_file(
            draft,
            doc,
            "scoring_script",
            (here / folder / script).resolve(),
            source_dir,
            ("code_configuration", "scoring_script"),
        )
    else:
        draft.todo(
            SERVING + ("scoring_script",),
            f"code_configuration {code!r} is not a local folder and script",
            "score.py",
            doc.where(("code_configuration",)),
        )
    _environment(draft, doc, data.get("environment"), here, source_dir)
    size = data.get("instance_type")
    if isinstance(size, str):
        known = INSTANCE_TYPES.get(size.lower())
        if known is None:
            draft.note(
                "todo",
                f"instance_type {size!r}: set model.serving.cpu and memory to what one replica gets",
                doc.where(("instance_type",)),
            )
        else:
            cpu, memory, gpu = known
            draft.put(SERVING + ("cpu",), cpu, f"instance_type: {size}")
            draft.put(SERVING + ("memory",), memory, f"instance_type: {size}")
            if gpu:
                draft.put(SERVING + ("gpu",), gpu, f"instance_type: {size}")
    for key, value in data.items():
        if key not in QUIET:
            draft.note("dropped", f"{key}: {value!r}: no equivalent in tftrain serve/deploy"[:300], doc.where((key,)))
    if isinstance(data.get("endpoint_name"), str):
        draft.note(
            "info",
            f"endpoint_name {data['endpoint_name']!r}: tftrain deploy --service-name names the InferenceService",
            doc.where(("endpoint_name",)),
        )


def _environment(draft: Draft, doc: YamlDocument, environment, here: Path, source_dir: Path | None) -> None:
    if isinstance(environment, dict):
        conda = environment.get("conda_file")
        if isinstance(conda, str):
            _put_file(draft, doc, "conda_file", (here / conda).resolve(), source_dir, ("environment", "conda_file"))
        if "image" in environment:
            draft.note(
                "dropped",
                f"environment.image {environment['image']!r}: the serving image is tftrain's (the model's "
                "TensorFlow set + azmlinfsrv)",
                doc.where(("environment", "image")),
            )
    elif isinstance(environment, str):
        draft.note(
            "todo",
            f"environment {environment!r} (registered in Azure): list the script's packages in"
            " model.serving.pip_packages",
            doc.where(("environment",)),
        )


def _put_file(draft: Draft, doc: YamlDocument, key: str, path: Path, source_dir: Path | None, loc: tuple) -> None:
    if source_dir is not None and path.is_relative_to(source_dir):
        draft.put(SERVING + (key,), path.relative_to(source_dir).as_posix(), f"from {doc.path}")
    else:
        draft.todo(SERVING + (key,), f"{path} is outside source_directory: copy it there", path.name, doc.where(loc))
