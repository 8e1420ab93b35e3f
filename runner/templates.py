"""Jinja2 templates from `templates/` (shipped inside the package as runner/templates)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2


def templates_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):  # installed, then a checkout
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"tftrain's templates are missing (looked in {here})")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(template: str, **values) -> str:
    return environment().get_template(template).render(**values)
