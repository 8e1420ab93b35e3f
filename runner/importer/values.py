"""What the static reading of a script yields besides plain literals."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Unknown:
    """A value only the running script would know; `node` is the expression in the source."""

    node: ast.AST


@dataclass(eq=False, repr=False)
class Obj:
    """An Azure ML SDK object: `kind` is its class (TensorFlow, Environment) or a role (datastore,
    dataset, data_input, conda, registration); `attrs` its arguments and the attributes set on it."""

    kind: str
    line: int
    attrs: dict[str, Any] = field(default_factory=dict)
    node: ast.AST | None = None

    def __repr__(self) -> str:
        """Shallow: a script can chain objects (`x = x.a`, 3,000 times) or make them hold themselves."""
        return f"{self.kind}(…)"

    def child(self, name: str) -> Any:
        """`obj.name`: created on first use, so that `env.docker.base_image = …` has somewhere to go."""
        if name not in self.attrs:
            self.attrs[name] = Obj(name, self.line)
        return self.attrs[name]

    @property
    def via(self) -> str:
        return self.attrs.get("_via", self.kind)


def known(value: Any) -> bool:
    """A plain literal (or a list/dict of them), with nothing left to the script."""
    if isinstance(value, (Unknown, Obj)):
        return False
    if isinstance(value, list):
        return all(known(item) for item in value)
    if isinstance(value, dict):
        return all(known(k) and known(v) for k, v in value.items())
    return True


def looks_numeric(text: str) -> bool:
    """`-1` or `-1e-3` is a value, not a flag."""
    try:
        float(text)
    except ValueError:
        return False
    return True
