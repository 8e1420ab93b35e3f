"""What an importer builds: manifest keys with comments, and the report of what did not map.

Both importers (Python SDK v1, YAML v2) fill a Draft; `finish` applies the rules they share
(name, compat, framework versions Horovod and pip can still give); manifest_writer renders it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runner.frameworks.releases import (
    DEFAULT_VERSION,
    FRAMEWORKS,
    HOROVOD,
    HOROVOD_FRAMEWORKS,
    framework,
    horovod_compatible,
)
from runner.manifest.fields import NAME_PATTERN, VERSION_PATTERN

TODO = "TODO(tftrain import)"
# Azure ML's GPU VM families: NC, ND, NV (Standard_NC6, STANDARD_ND40RS_V2, Standard_NV12s_v3).
GPU_VM = re.compile(r"^(standard_)?n[cdv]", re.IGNORECASE)
CURATED_TF = re.compile(r"tensorflow-(\d+\.\d+)", re.IGNORECASE)


@dataclass
class Entry:
    value: Any  # a scalar, a list, or a dict of str → Entry (a mapping)
    comment: str = ""
    disabled: bool = False  # written commented out, for the user to fill in


@dataclass(frozen=True)
class Note:
    kind: str  # todo | changed | dropped | info
    text: str
    where: str = ""


@dataclass
class Draft:
    origin: str  # what was imported, e.g. "TensorFlow(...) at job.py:12"
    keys: dict[str, Entry] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    header: list[str] = field(default_factory=list)  # the Azure ML source, shown atop the manifest

    def put(self, path: str | tuple[str, ...], value: Any, comment: str = "", disabled: bool = False) -> None:
        parts = (path,) if isinstance(path, str) else path
        table = self.keys
        for part in parts[:-1]:
            entry = table.setdefault(part, Entry({}))
            if not isinstance(entry.value, dict):
                entry.value = {}
            table = entry.value
        table[parts[-1]] = Entry(value, comment, disabled)

    def get(self, path: str | tuple[str, ...], default: Any = None) -> Any:
        entry = self.entry(path)
        return default if entry is None or entry.disabled else entry.value

    def entry(self, path: str | tuple[str, ...]) -> Entry | None:
        parts = (path,) if isinstance(path, str) else path
        table: Any = self.keys
        entry = None
        for part in parts:
            if not isinstance(table, dict) or part not in table:
                return None
            entry = table[part]
            table = entry.value
        return entry

    def note(self, kind: str, text: str, where: str = "") -> None:
        note = Note(kind, text, where)
        if note not in self.notes:
            self.notes.append(note)

    def unresolved(self, path: str | tuple[str, ...], source: str, where: str, placeholder: Any = None) -> None:
        """A value tftrain cannot know statically: a TODO comment next to the key, a report line."""
        self.todo(path, f"{source} at {where}", placeholder, where, report=f"not resolved statically: {source}")

    def todo(
        self, path: str | tuple[str, ...], message: str, placeholder: Any = None, where: str = "", report: str = ""
    ) -> None:
        self.put(path, placeholder, f"{TODO}: {message}", disabled=placeholder is None)
        self.note("todo", f"{dotted(path)}: {report or message}", where)

    def todo_count(self) -> int:
        return sum(1 for note in self.notes if note.kind == "todo")


def dotted(path: str | tuple[str, ...]) -> str:
    return path if isinstance(path, str) else ".".join(path)


def model_name(text: str) -> str | None:
    """`text` made into a valid manifest name (letters, digits, '.', '_', '-'; at most 64)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).lstrip("._-")[:64].rstrip("-")
    return name if name and re.fullmatch(NAME_PATTERN, name) else None


def is_gpu_vm(vm_size: Any) -> bool:
    return isinstance(vm_size, str) and bool(GPU_VM.match(vm_size))


def curated_environment(draft: Draft, name: str, where: str) -> None:
    """Azure ML's curated environments (AzureML-TensorFlow-2.3-GPU, AzureML-tensorflow-2.12-cuda11)."""
    match = CURATED_TF.search(name)
    if match and draft.get("framework_version") is None:
        draft.put("framework_version", match[1])
    if re.search(r"gpu|cuda", name, re.IGNORECASE) and not draft.get("use_gpu"):
        draft.put("use_gpu", True)
    draft.note("changed", f"Azure ML environment {name!r} → framework_version/use_gpu read from its name", where)


def compute_note(draft: Draft, target: Any, where: str, gpu: bool) -> None:
    if target in (None, "local"):
        return
    hint = "; its jobs used a GPU: keep use_gpu: true and pick GPU runners (compute.gpu_type)" if gpu else ""
    draft.note(
        "todo",
        f"compute target {target!r} → choose runner labels (compute.runner_labels) or a pool (compute.target:"
        f" pool){hint}",
        where,
    )


def finish(draft: Draft, stem: str) -> None:
    """Rules every import applies last: a valid name, compat, a framework tftrain can install."""
    name = draft.get("name")
    if not name:
        fallback = model_name(stem) or "imported"
        draft.put("name", fallback)
        draft.note("info", f"name: no experiment or model name found; named after the file ({fallback!r})")
    draft.put("compat", "azureml")
    _framework(draft)
    backend = draft.get(("distributed_training", "backend"))
    packages = draft.entry("pip_packages")
    if backend == "mpi" and packages and isinstance(packages.value, list):
        kept = [p for p in packages.value if not re.match(r"horovod\b", str(p), re.IGNORECASE)]
        if len(kept) < len(packages.value):
            draft.note("changed", f"pip_packages: horovod left out: tftrain installs {HOROVOD} itself for backend: mpi")
            packages.value = kept
            if not kept and not packages.comment:
                del draft.keys["pip_packages"]
    if backend == "parameter_server":
        draft.note(
            "info",
            "distributed_training: tftrain adds a chief task (TF2 ParameterServerStrategy's coordinator) that Azure"
            " ML's TF_CONFIG did not have; set distributed_training.chief: false for a TF1 script whose worker 0 is"
            " chief",
        )


def _framework(draft: Draft) -> None:
    entry = draft.entry("framework_version")
    horovod = draft.get(("distributed_training", "backend")) == "mpi"
    if entry is None or entry.disabled:
        if horovod and entry is None:
            draft.note("info", f"framework_version: not set; Horovod jobs default to {DEFAULT_VERSION}")
        return
    version = str(entry.value)
    if not re.fullmatch(VERSION_PATTERN, version):
        draft.todo("framework_version", f"{version!r} is not a TensorFlow version like '2.18'", where="")
        return
    why = ""
    if horovod and not horovod_compatible(version):
        why = f"Horovod (backend: mpi) builds against TensorFlow {HOROVOD_FRAMEWORKS[0]}–{HOROVOD_FRAMEWORKS[-1]} only"
    elif framework(version) is None:
        why = f"tftrain supports TensorFlow {min(FRAMEWORKS, key=_key)}–{max(FRAMEWORKS, key=_key)}, not {version}"
    if not why:
        return
    if version.startswith("1."):
        why += "; TF 1.x code (tf.Session, tf.placeholder) needs tf.compat.v1 or a port to TF 2"
    draft.put("framework_version", DEFAULT_VERSION, f"was {version!r} in Azure ML")
    draft.note("changed", f"framework_version: {version!r} → {DEFAULT_VERSION!r}: {why}")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
