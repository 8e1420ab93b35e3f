"""A static reading of an Azure ML SDK v1 script: statements are walked in order (both branches
of an `if`, the bodies of loops, `try` and functions), literals are evaluated, and the SDK calls
that matter become `Obj`s. Nothing is executed or imported, and what is evaluated is held to a
budget (runner.importer.budget): the value built, the steps taken.
"""

from __future__ import annotations

import ast
import contextlib
import operator
import posixpath
from typing import Any

from runner.errors import ManifestError
from runner.importer.budget import Budget, OverBudget, check_format_spec, check_int_bits, printf_computable
from runner.importer.methods import call_method
from runner.importer.sdk import JOBS, KINDS, SIGNATURES, known_callee
from runner.importer.source import PythonSource
from runner.importer.values import Obj, Unknown, known

BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
LITERAL_CALLS = {"str": str, "int": int, "float": float, "bool": bool}
LARGEST = 10_000  # `9**9**9` or `"x" * 10**9` is not computed at all: the computing itself stays cheap
CONSTRUCTED = (
    ast.List,
    ast.Tuple,
    ast.Set,
    ast.Dict,
    ast.JoinedStr,
    ast.BinOp,
    ast.Call,
)  # the budget admits what they build


def _small(op: ast.operator, left, right) -> bool:
    """Whether computing it is cheap: no huge powers, products, repeated strings or lists."""
    if isinstance(op, ast.Pow):
        return (
            isinstance(right, (int, float)) and abs(right) <= 64 and not (isinstance(left, int) and abs(left) > LARGEST)
        )
    if isinstance(op, ast.Mult):
        sizes = [len(v) for v in (left, right) if isinstance(v, (str, bytes, list, tuple))]
        counts = [abs(v) for v in (left, right) if isinstance(v, int)]
        return not sizes or not counts or sizes[0] * counts[0] <= LARGEST
    return True


def read_script(source: PythonSource) -> Interpreter:
    """`source` parsed and read; a file over the budget is refused with one line naming FILE:LINE."""
    module = source.parse()
    interp = Interpreter()
    try:
        interp.run(module.body)
    except OverBudget as exc:
        raise ManifestError(f"{source.where(exc.line)}: {exc.message()}") from None
    return interp


class Interpreter:
    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self.imports: dict[str, str] = {}  # local name → dotted name it stands for
        self.jobs: list[Obj] = []
        self.submitted: list[tuple[Obj, Any, int]] = []  # (job or sweep, experiment, line)
        self.registrations: list[Obj] = []
        self.deployments: list[Obj] = []  # Model.deploy(...): mapped to model.serving
        self.experiments: list[Obj] = []
        self.uploads: list[tuple[Any, Any, Any, int]] = []  # (datastore name, target_path, local source, line)
        self.budget = Budget()

    # --- statements -------------------------------------------------------------------------
    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                self.imports[alias.asname or alias.name] = alias.name
        elif isinstance(stmt, ast.Assign):
            value = self.eval(stmt.value)
            for target in stmt.targets:
                self.bind(target, value)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.bind(stmt.target, self.eval(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            self.bind(
                stmt.target, self.eval(ast.BinOp(stmt.target, stmt.op, stmt.value, lineno=stmt.lineno, col_offset=0))
            )
        elif isinstance(stmt, ast.Expr):
            self.eval(stmt.value)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.bind(stmt.target, Unknown(stmt.iter))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                value = self.eval(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.budget.spend(len(self.names), stmt.lineno)
            outer = dict(self.names)  # a function's names (its parameters: unknown) stay in it
            for arg in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs]:
                self.names[arg.arg] = Unknown(arg)
            self.run(stmt.body)
            self.names = outer
            return
        for name in ("body", "orelse", "finalbody"):
            self.run(getattr(stmt, name, None) or [])
        for handler in getattr(stmt, "handlers", None) or []:
            self.run(handler.body)

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            fits = isinstance(value, list) and len(value) == len(target.elts)
            for index, element in enumerate(target.elts):
                self.bind(element, value[index] if fits else Unknown(target))
        elif isinstance(target, ast.Attribute):
            owner = self.eval(target.value)
            if isinstance(owner, Obj):
                owner.attrs[target.attr] = value
        elif isinstance(target, ast.Subscript):
            owner, key = self.eval(target.value), self.eval(target.slice)
            if isinstance(owner, Obj) and isinstance(key, str):
                owner.attrs[key] = value
            elif isinstance(owner, dict) and not isinstance(key, (Unknown, Obj, list, dict)):
                owner[key] = value
                self.budget.admit(owner, target.lineno)  # D['a'] = D: a value can grow (or loop) in place

    # --- expressions ------------------------------------------------------------------------
    def eval(self, node: ast.expr) -> Any:
        """The value of `node`, each evaluation a step of the budget, each value built admitted by it."""
        self.budget.spend(1, getattr(node, "lineno", None))
        value = self._value(node)
        if isinstance(node, CONSTRUCTED) and not isinstance(value, (Unknown, Obj)):
            self.budget.admit(value, node.lineno)
        return value

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [Unknown(e) if isinstance(e, ast.Starred) else self.eval(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            result: dict[Any, Any] = {}
            for key, value in zip(node.keys, node.values):
                evaluated = self.eval(value)
                if key is None:
                    result.update(evaluated if isinstance(evaluated, dict) else {Unknown(value): evaluated})
                else:
                    result[self._key(key)] = evaluated
            return result
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            return Unknown(node)
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node)
        if isinstance(node, ast.BinOp):
            left, right = self.eval(node.left), self.eval(node.right)
            if (
                isinstance(node.op, ast.Mod)
                and isinstance(left, (str, bytes))
                and not printf_computable(left, node.lineno)
            ):
                return Unknown(node)
            if isinstance(node.op, ast.Mult) and type(left) is type(right) is int:  # X = X * X, forty times
                check_int_bits(left.bit_length() + right.bit_length() - 1, node.lineno)
            if known(left) and known(right) and type(node.op) in BINARY and _small(node.op, left, right):
                with contextlib.suppress(Exception):  # a type error in the script is the script's business
                    return BINARY[type(node.op)](left, right)
            return Unknown(node)
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand)
            if isinstance(operand, (int, float)) and isinstance(node.op, (ast.USub, ast.UAdd)):
                return -operand if isinstance(node.op, ast.USub) else operand
            if known(operand) and isinstance(node.op, ast.Not):
                return not operand
            return Unknown(node)
        if isinstance(node, ast.Subscript):
            return self._subscript(node)
        if isinstance(node, ast.Attribute):
            if self.dotted(node) is None:
                owner = self.eval(node.value)
                if isinstance(owner, Obj):
                    return owner.child(node.attr)
            return Unknown(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        return Unknown(node)

    def _key(self, node: ast.expr) -> Any:
        key = self.eval(node)
        return key if isinstance(key, (str, int, float, bool)) or key is None else Unknown(node)

    def _fstring(self, node: ast.JoinedStr) -> Any:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            inner = self.eval(value.value)
            spec = self.eval(value.format_spec) if value.format_spec else ""
            if not isinstance(inner, (str, int, float, bool)) or not isinstance(spec, str):
                return Unknown(node)
            check_format_spec(spec, node.lineno)
            try:
                inner = {115: str, 114: repr, 97: ascii}.get(value.conversion, lambda v: v)(inner)
                parts.append(format(inner, spec))
            except (ValueError, TypeError):  # a spec that does not fit the value: the script's business
                return Unknown(node)
        return "".join(parts)

    def _subscript(self, node: ast.Subscript) -> Any:
        owner, key = self.eval(node.value), self.eval(node.slice)
        if isinstance(owner, Obj) and isinstance(key, str):
            collection = {"datastores": "datastore", "datasets": "dataset", "compute_targets": "compute"}
            if owner.kind in collection:
                return Obj(collection[owner.kind], node.lineno, {"name": key}, node)
            return owner.attrs.get(key, Unknown(node))
        if isinstance(owner, (dict, list)) and known(key) and not isinstance(key, (list, dict)):
            try:
                return owner[key]
            except (KeyError, IndexError, TypeError):
                pass
        return Unknown(node)

    def dotted(self, node: ast.expr) -> str | None:
        """`Dataset.File.from_files` for a chain of attributes on a module or class (no variable)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.names:
            return None
        parts.append(self.imports.get(node.id, node.id))
        return ".".join(reversed(parts))

    # --- calls ------------------------------------------------------------------------------
    def call(self, node: ast.Call) -> Any:
        args = [Unknown(a) if isinstance(a, ast.Starred) else self.eval(a) for a in node.args]
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            value = self.eval(keyword.value)
            if keyword.arg is not None:
                kwargs[keyword.arg] = value
            elif isinstance(value, dict):
                kwargs.update({k: v for k, v in value.items() if isinstance(k, str)})
            else:
                kwargs["**"] = value
        dotted = self.dotted(node.func)
        if dotted is None:
            owner = self.eval(node.func.value) if isinstance(node.func, ast.Attribute) else None
            if isinstance(owner, Obj):
                return call_method(self, owner, node.func.attr, args, kwargs, node)
            return Unknown(node)
        name = known_callee(dotted)
        if name is None:
            return self._builtin(dotted, args, kwargs, node)
        params = dict(zip(SIGNATURES[name], args))
        if len(args) > len(SIGNATURES[name]):
            params["*"] = args[len(SIGNATURES[name]) :]
        params.update(kwargs)
        params["_via"] = name
        params["_lines"] = {k.arg: k.value.lineno for k in node.keywords if k.arg}
        params["_lines"].update({p: a.lineno for p, a in zip(SIGNATURES[name], node.args)})
        if "datastore_name" in params:
            params.setdefault("name", params["datastore_name"])
        obj = Obj(KINDS.get(name, name), node.lineno, params, node)
        if name in JOBS:
            self.jobs.append(obj)
        elif name == "Experiment":
            self.experiments.append(obj)
        elif name == "Model.register":
            self.registrations.append(obj)
        elif name == "Model.deploy":
            self.deployments.append(obj)
        return obj

    def _builtin(self, dotted: str, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
        if dotted in ("os.path.join", "posixpath.join", "path.join") and args and all(isinstance(a, str) for a in args):
            return posixpath.join(*args)
        if dotted in LITERAL_CALLS and len(args) == 1 and known(args[0]) and not kwargs:
            try:
                return LITERAL_CALLS[dotted](args[0])
            except (TypeError, ValueError):
                pass
        if dotted == "range" and 1 <= len(args) <= 3 and not kwargs and all(type(a) is int for a in args):
            with contextlib.suppress(ValueError):  # range(0, 9, 0)
                values = range(*args)
                if len(values) <= LARGEST:  # choice(range(...)) in a sweep: a list the file spells out
                    return list(values)
        if dotted in ("dict",) and not args and all(not isinstance(v, Unknown) for v in kwargs.values()):
            return dict(kwargs)
        return Unknown(node)
