"""Azure ML datastores, datasets and DataReferences → tftrain `inputs` (+ `{input: NAME}` params)."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from runner.importer.draft import Draft
from runner.importer.values import Obj
from runner.manifest.sources import check_sources

REMOTE = ("https://", "http://", "s3://")


def add_input(ctx, obj: Obj, hint: str) -> str | None:
    """The name of the input `obj` (an as_mount()/as_download(), a dataset, a DataReference) became."""
    if id(obj) in ctx.input_names:
        return ctx.input_names[id(obj)]
    where = ctx.where(obj.line)
    name, mode, source = None, "download", obj
    if obj.kind == "data_input" and obj.via == "DataReference":
        name, mode = obj.attrs.get("data_reference_name"), obj.attrs.get("mode", "mount")
        source = Obj("datapath", obj.line, {k: obj.attrs.get(k) for k in ("datastore", "path_on_datastore")})
    elif obj.kind == "data_input":
        mode, source = obj.attrs.get("mode", "download"), obj.attrs.get("source")
    if mode not in ("mount", "download"):
        ctx.draft.note(
            "dropped", f"data reference in mode {mode!r}: tftrain keeps what the script writes to outputs/", where
        )
        return None
    if isinstance(source, Obj) and source.kind == "dataset":
        name = name or source.attrs.get("input_name") or source.attrs.get("name")
    name = _identifier(name if isinstance(name, str) else ctx.variable_of(source) or ctx.variable_of(obj) or hint)
    taken = ctx.draft.get("inputs") or {}
    base, number = name, 1
    while name in taken:
        number += 1
        name = f"{base}_{number}"
    ctx.input_names[id(obj)] = name
    put_input(ctx.draft, name, *_source(ctx, name, source, where), mode, where)
    return name


def put_input(draft: Draft, name: str, source: str | list[str], message: str, mode: str, where: str) -> None:
    """inputs.NAME; a `message` makes its source a placeholder with a TODO."""
    if message:
        draft.todo(("inputs", name, "source"), message, placeholder=source, where=where)
    else:
        draft.put(("inputs", name, "source"), source)
    draft.put(("inputs", name, "mode"), mode)


def datastore_source(store: str, path: str | None, detail: str = "") -> tuple[str, str]:
    """An Azure ML datastore path as a placeholder source, and the message that says what to do."""
    source = posixpath.join("s3://TODO", store, *([path] if path else []))
    return source, f"{_was(store, path)}{detail}; copy it to S3/https or a local path"


def _was(store: str, path: str | None) -> str:
    return f"was datastore {store!r}" + (f" path {path!r}" if path else "")


def _source(ctx, name: str, source: Any, where: str) -> tuple[str | list[str], str]:
    """The input's source, and what to do about it where it is only a placeholder."""
    if isinstance(source, Obj) and source.kind == "dataset":
        via = source.via
        if via == "Dataset.get_by_name" or "path" not in source.attrs:
            dataset = source.attrs.get("name")
            return (
                f"s3://TODO/{dataset}",
                f"was registered dataset {dataset!r}; copy its files to S3/https or a local path",
            )
        if via.startswith("Dataset.Tabular"):
            ctx.draft.note(
                "info",
                f"inputs.{name}: a tabular dataset: the script now gets the files' path, not a TabularDataset",
                where,
            )
        source = source.attrs["path"]
    if isinstance(source, list) and len(source) == 2 and isinstance(source[0], Obj) and isinstance(source[1], str):
        source = Obj("datapath", 0, {"datastore": source[0], "path_on_datastore": source[1]})  # (datastore, path)
    if isinstance(source, list) and len(source) == 1:
        source = source[0]
    if isinstance(source, str) and source.startswith(REMOTE):
        return source, ""
    if isinstance(source, list):
        return _several(name, source)
    if not isinstance(source, Obj) or source.kind not in ("datastore", "datapath"):
        shown = ctx.segment(source.node) if isinstance(source, Obj) and source.node else repr(source)
        return "s3://TODO/" + name, f"was {shown}; copy the data to S3/https or a local path"
    store = source if source.kind == "datastore" else source.attrs.get("datastore")
    path = source.attrs.get("path_on_datastore") if source.kind == "datapath" else None
    store_name = store.attrs.get("name") if isinstance(store, Obj) else None
    store_name = store_name if isinstance(store_name, str) else "?"
    path = re.sub(r"/?\*+$", "", path).strip("/") if isinstance(path, str) else None
    local = _uploaded(ctx, store_name, path)
    if local is None:
        return datastore_source(store_name, path)
    folder, line = local
    found = (ctx.input_dir / folder).resolve()
    if not found.exists():
        return datastore_source(store_name, path, f", uploaded from {folder!r} (not found)")
    ctx.draft.note(
        "changed",
        f"inputs.{name}: {_was(store_name, path)}, uploaded from {folder!r}: the local copy is the source",
        ctx.where(line),
    )
    return ctx.relative(found), ""


def _several(name: str, sources: list[Any]) -> tuple[str | list[str], str]:
    """Dataset.File.from_files(path=[url, …]): a list of https files is a source as it is (one
    directory); anything else in the list, or two files of one name, is left to the user."""
    try:
        return check_sources(sources), ""
    except ValueError as exc:
        shown = ", ".join(str(item) for item in sources[:3]) + (", …" if len(sources) > 3 else "")
        return "s3://TODO/" + name, f"was {len(sources)} paths ({shown}); as a list of sources: {exc}"


def _uploaded(ctx, store: str, path: str | None) -> tuple[str, int] | None:
    """The local folder a `ds.upload(src_dir=…, target_path=…)` in the script put at `path`."""
    for name, target, local, line in reversed(ctx.interp.uploads):
        if not isinstance(local, str) or (isinstance(name, str) and name != store and store != "?"):
            continue
        target = (target if isinstance(target, str) else "").strip("/")
        wanted = path or ""
        if target == wanted:
            return local, line
        if not target or wanted.startswith(target + "/"):
            return posixpath.join(local, wanted[len(target) :].strip("/")), line
    return None


def _identifier(text: Any) -> str:
    name = re.sub(r"\W+", "_", str(text)).strip("_")
    return name or "data"


def is_data(value: Any) -> bool:
    return isinstance(value, Obj) and value.kind in ("data_input", "datastore", "datapath", "dataset")
