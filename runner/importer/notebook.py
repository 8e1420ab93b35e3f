"""What a notebook's IPython magics mean for the manifest (runner.importer.magics reads them):
`%pip install X` (or `!pip install X`) → pip_packages; a file a cell writes (`%%writefile NAME`)
is there for the environment files that name it (packages.environment_file) and reported
otherwise; every other magic and shell line is reported and skipped — tftrain runs the entry
script, not the notebook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runner.importer.magics import PYTHON_BODY, MagicKind
from runner.importer.packages import add_packages

EXPANDED = re.compile(r"\$(\w+)|\{(\w+)\}")  # IPython expands $name and {name} in a magic's line


@dataclass
class Written:
    """A file that a `%%writefile` cell leaves next to the notebook."""

    name: str  # as the magic writes it, variables expanded
    content: str
    where: str
    used: bool = False


def written_files(ctx) -> dict[Path, Written]:
    """The files the notebook writes, by resolved path (seen from the notebook's folder, its
    working directory); `-a` appends, as IPython does. Names that stay unknown are reported."""
    files: dict[Path, Written] = {}
    for magic in ctx.source.magics:
        if magic.kind is not MagicKind.CELL or magic.name != "writefile":
            continue
        where = ctx.where(magic.line)
        words = magic.args.split()
        append = bool(words) and words[0] in ("-a", "--append")
        name = _expanded(ctx, " ".join(words[1:] if append else words))
        if not name:
            ctx.draft.note(
                "todo", f"{magic.shown}: the file name is not known statically; its content was not read", where
            )
            continue
        path = (ctx.input_dir / name).resolve()
        before = files[path].content if append and path in files else ""
        files[path] = Written(name, before + magic.body, where)
    return files


def _expanded(ctx, text: str) -> str | None:
    """`$folder/score.py` with the notebook's string variables in place; None when one is unknown."""
    unknown = False

    def value(match: re.Match) -> str:
        nonlocal unknown
        found = ctx.interp.names.get(match[1] or match[2])
        unknown = unknown or not isinstance(found, str)
        return found if isinstance(found, str) else ""

    expanded = EXPANDED.sub(value, text.strip().strip("'\""))
    return None if unknown or not expanded else expanded


def report_magics(ctx) -> None:
    """pip installs become pip_packages; the rest of the magics, and the written files no key
    used, go into the report."""
    for magic in ctx.source.magics:
        where = ctx.where(magic.line)
        packages = _pip_packages(ctx, magic, where)
        if packages:
            add_packages(ctx.draft, "pip_packages", packages, where)
            ctx.draft.note("changed", f"{magic.shown}: → pip_packages (installed before the training starts)", where)
        elif magic.kind is MagicKind.CELL and magic.name in PYTHON_BODY:
            ctx.draft.note("info", f"{magic.shown}: the cell's code is read; the magic itself is IPython's", where)
        elif not (magic.kind is MagicKind.CELL and magic.name == "writefile"):
            ctx.draft.note(
                "dropped",
                f"{magic.shown}: an IPython {magic.kind.value}, not imported: tftrain runs entry_script",
                where,
            )
    entry = _entry_script(ctx)
    for path, written in ctx.written.items():
        if written.used:
            continue
        if path == entry:
            ctx.draft.note(
                "todo",
                f"%%writefile {written.name}: the notebook writes entry_script; save that cell as {ctx.relative(path)} "
                "before `tftrain run` (the import writes only the manifest and its report)",
                written.where,
            )
        elif (
            path.suffix == ".py"
            and re.search(r"^def init\(", written.content, re.M)
            and re.search(r"^def run\(", written.content, re.M)
        ):
            ctx.draft.note(
                "info",
                f"%%writefile {written.name}: an Azure ML scoring script (init/run): `tftrain serve` serves the"
                " registered model without one; port its pre- and post-processing to the client",
                written.where,
            )
        else:
            ctx.draft.note(
                "info",
                f"%%writefile {written.name}: a file the notebook writes; no key of the manifest uses it",
                written.where,
            )


def _pip_packages(ctx, magic, where: str) -> list[str] | None:
    """`%pip install $name`: IPython expands the notebook's variables; one unknown is a TODO, not a package."""
    packages = magic.pip_installs()
    if not packages or not any(EXPANDED.search(package) for package in packages):
        return packages
    known = [_expanded(ctx, package) for package in packages]
    if None in known:
        ctx.draft.note("todo", f"{magic.shown}: a package name is not known statically: add it to pip_packages", where)
    return [package for package in known if package]


def _entry_script(ctx) -> Path | None:
    folder, script = ctx.source_dir(), ctx.draft.get("entry_script")
    return (folder / script).resolve() if folder is not None and isinstance(script, str) else None
