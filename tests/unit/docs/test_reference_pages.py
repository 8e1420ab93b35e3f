"""The docs site: the generated reference pages are up to date, and README stays a short way in."""

from __future__ import annotations

import importlib.util
import re

import yaml
from conftest import REPO

DOCS = REPO / "docs"


def generator():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_generated_page_is_stale():
    stale = [str(path.relative_to(REPO)) for path in generator().stale_pages()]
    assert stale == [], "run .venv/bin/python scripts/docs_reference.py"


def test_the_check_names_a_stale_page(tmp_path, capsys, monkeypatch):
    docs = generator()
    for page in docs.PAGES:
        (tmp_path / page.name).write_text(docs.rendered(page))
    assert docs.stale_pages(tmp_path) == []
    (tmp_path / "errors.md").write_text(docs.rendered(docs.PAGES[2]).replace("| 3 |", "| 33 |"))
    (tmp_path / "action.md").unlink()
    assert docs.stale_pages(tmp_path) == [tmp_path / "errors.md", tmp_path / "action.md"]
    monkeypatch.setattr(docs, "REFERENCE", tmp_path)
    assert docs.main(["--check"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"docs_reference: {tmp_path / name} is stale: run .venv/bin/python scripts/docs_reference.py"
        for name in ("errors.md", "action.md")
    ]


def test_every_exit_code_and_manifest_key_is_in_the_reference():
    import json

    from runner import errors

    text = (DOCS / "reference" / "errors.md").read_text()
    for kind in vars(errors).values():
        if isinstance(kind, type) and issubclass(kind, errors.FatalError):
            assert f"| {kind.exit_code} | `{kind.__name__}` |" in text
    manifest = (DOCS / "reference" / "manifest.md").read_text()
    for key in json.loads((REPO / "tftrain.schema.json").read_text())["properties"]:
        assert f"| `{key}` |" in manifest


def nav_pages(entries) -> set[str]:
    found = set()
    for entry in entries:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found |= nav_pages(value) if isinstance(value, list) else {value}
    return found


def test_every_page_is_in_the_navigation():
    nav = nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert pages - nav == set()
    assert nav - pages == set()


def test_readme_is_a_short_way_in():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "| exit code |" not in text  # the error reference is generated: docs/reference/errors.md
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert links and [link for link in links if not (REPO / link).exists()] == []
