"""A Draft as YAML text, comments included (the reason it is written by hand), and as a report."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from runner.importer.draft import Draft, Entry

KEY_ORDER = (
    "name", "source_directory", "entry_script", "script_params", "framework_version", "use_gpu", "use_docker",
    "custom_docker_image", "image_registry", "user_managed", "python", "pip_packages", "conda_packages",
    "pip_requirements_file", "conda_dependencies_file",
    "environment_variables", "secrets", "inputs", "shm_size", "resume_from", "max_run_duration_seconds",
    "retry", "node_count", "process_count_per_node", "distributed_training", "compute", "compat", "outputs_dir",
    "logs_dir",
    "model", "metrics", "sweep",
)  # fmt: skip
SECTIONS = {
    "todo": "To do",
    "changed": "Changed on the way",
    "dropped": "No equivalent in tftrain (left out)",
    "info": "Notes",
}
FLOW_WIDTH = 88
VERSION_LIKE = re.compile(r"^[0-9][0-9.]*$")  # "2.18", "2.16.1": quoted, so no reader takes them for numbers


def render_manifest(draft: Draft) -> str:
    lines = [f"# {line}" if line else "#" for line in draft.header]
    order = {key: index for index, key in enumerate(KEY_ORDER)}
    for key in sorted(draft.keys, key=lambda k: order.get(k, len(order))):
        lines += _entry(key, draft.keys[key], 0)
    return "\n".join(lines) + "\n"


def _entry(key: str, entry: Entry, depth: int) -> list[str]:
    indent = "  " * depth
    comment = f"  # {entry.comment}" if entry.comment else ""
    value = entry.value
    if entry.disabled:
        shown = "" if value is None else f" {_flow(value)}"
        return [f"{indent}# {scalar(key)}:{shown}{comment}"]
    if isinstance(value, dict) and value and all(isinstance(v, Entry) for v in value.values()):
        # With every child commented out, the key alone would be null where the manifest wants a mapping.
        off = "# " if all(child.disabled for child in value.values()) else ""
        lines = [f"{indent}{off}{scalar(key)}:{comment}"]
        for child, child_entry in value.items():
            lines += _entry(child, child_entry, depth + 1)
        return lines
    if isinstance(value, list) and value and len(_flow(value)) + len(indent) + len(key) > FLOW_WIDTH:
        return [f"{indent}{scalar(key)}:{comment}"] + [f"{indent}  - {scalar(item)}" for item in value]
    return [f"{indent}{scalar(key)}: {_flow(value)}{comment}"]


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{scalar(k)}: {_flow(v.value if isinstance(v, Entry) else v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    return scalar(value)


def scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and "e" in repr(value) and "." not in repr(value):
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}.0e{exponent if exponent[0] in '+-' else '+' + exponent}"  # PyYAML reads 1e-05 as text
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    dumped = yaml.safe_dump(text, default_flow_style=True, width=1 << 30, allow_unicode=True)
    dumped = dumped.removesuffix("\n").removesuffix("\n...").strip()
    if dumped.startswith(("'", '"')) or "\n" in dumped or any(c in text for c in ",[]{}#") or VERSION_LIKE.match(text):
        return json.dumps(text, ensure_ascii=False)  # a double-quoted YAML scalar, as the docs write them
    return dumped


def render_report(draft: Draft, source: str, manifest: str) -> str:
    lines = [
        "# tftrain import report",
        "",
        f"`tftrain import azureml` read `{source}` ({draft.origin}) and wrote `{manifest}`.",
        "Keys marked `TODO(tftrain import)` in the manifest need you; the rest transcribed directly.",
    ]
    for kind, title in SECTIONS.items():
        notes = [note for note in draft.notes if note.kind == kind]
        if not notes:
            continue
        lines += ["", f"## {title} ({len(notes)})", ""]
        lines += [f"- {note.text}" + (f" ({note.where})" if note.where else "") for note in notes]
    return "\n".join(lines) + "\n"


def report_rows(draft: Draft) -> list[list[str]]:
    order = list(SECTIONS)
    notes = sorted(draft.notes, key=lambda note: order.index(note.kind))
    return [[note.kind, note.text, note.where] for note in notes]
