"""Hostile files for `tftrain import azureml`: the importer reads, never runs, and what it
evaluates is held to one budget (runner/importer/budget.py). Each case is refused with one line
naming FILE:LINE (ManifestError, exit 3), within seconds, writing nothing."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hostile import assert_clean, assert_refused, files_containing, nothing_written_outside

from runner.errors import ManifestError
from runner.importer import budget

HEAD = "from azureml.train.dnn import TensorFlow\n"
TAIL = "\nest = TensorFlow(source_directory='.', entry_script='train.py')\n"
SECONDS = 30  # each finishes in a few; a hang fails here instead of holding the suite
SECRET = "hunter2-not-to-be-printed"


def _notebook(*sources) -> str:
    cells = [
        {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}
        for source in sources
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def doubled(start: str, step: str) -> str:
    """A value doubled 40 times: 2**40 items if it were computed."""
    return f"{start}\n" + f"{step}\n" * 40


# (id, file name, text, what the line says, the line it names)
CASES = [
    ("deep_plus", "x = 1" + "+1" * 100_000, "nested too deeply", ":2:"),
    ("deep_attributes", "x = a" + ".b" * 100_000, "nested too deeply", ":2:"),
    ("deep_calls", "x = f" + "()" * 100_000, "nested too deeply", ":2:"),
    ("deep_subscripts", "x = a" + "[0]" * 100_000, "nested too deeply", ":2:"),
    ("unary_200k", "x = " + "-" * 200_000 + "1", "nested too deeply", ":2:"),
    ("not_100k", "x = " + "not " * 100_000 + "1", "nested too deeply", ":2:"),
    ("nested_500", "x = 1" + "+1" * 500, "nested more than", ":2:"),
    ("format_width_overflow", 'x = f"{1:>99999999999999999999}"', "format width", ":2:"),
    ("format_width_1g", 'x = f"{1:>999999999}"', "format width", ":2:"),
    ("format_width_nested", "w = '999999999'\nx = f'{1:{w}}'", "format width", ":3:"),
    ("printf_width", 'x = "%999999999d" % 1', "format width", ":2:"),
    ("printf_precision_bytes", 'x = b"%.999999999f" % 1.0', "format width", ":2:"),
    ("string_doubled", doubled("S = 'ab'", "S = S + S"), "more than 100,000", ""),
    ("list_doubled", doubled("L = [1]", "L = L + L"), "more than 100,000", ""),
    ("int_squared", doubled("X = 3", "X = X * X"), "integer of more than", ""),
    ("list_of_itself", doubled("L = [1]", "L = [L, L]"), "more than 100,000", ""),
    ("dict_of_itself", doubled("D = {}", "D = {'a': D, 'b': D}"), "more than 100,000", ""),
    ("dict_holds_itself", "D = {}\nD['a'] = D\nprint(D == D)", "nested more than", ":3:"),
    ("list_in_list_1000", "L = 1\n" + "L = [L]\n" * 1000, "nested more than", ":52:"),
    (
        "package_list_holds_itself",
        "from azureml.core.conda_dependencies import CondaDependencies\nL = ['a']\ncd ="
        " CondaDependencies.create(pip_packages=L)\n" + "cd.add_pip_package(L)\n" * 60,
        "nested more than",
        ":5:",
    ),
    ("wide_list", "x = [" + "1, " * 120_000 + "]", "more than 100,000", ":2:"),
    (
        "many_functions",
        "".join(f"a{i} = {i}\n" for i in range(3000)) + "def f(): pass\n" * 3000,
        "evaluation steps",
        "",
    ),
    ("lines_2m", "\n" * 2_000_000, "larger than", ""),
    ("lines_30k", "\n" * 30_000, "more than 20,000 lines", ":20001:"),
]


def refused_in_time(cli, tmp_path: Path, name: str, data: str) -> tuple:
    """`tftrain import azureml NAME` in a thread held to SECONDS: (result, seconds)."""
    source = tmp_path / name
    source.write_text(data)
    output = tmp_path / "out" / "tftrain.yml"
    done: dict = {}

    def work() -> None:
        started = time.monotonic()
        done["result"] = cli("import", "azureml", str(source), "-o", str(output), cwd=tmp_path, env={"SECRET": SECRET})
        done["seconds"] = time.monotonic() - started

    with nothing_written_outside(tmp_path, source):
        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        thread.join(SECONDS)
        assert not thread.is_alive(), f"{name}: still reading after {SECONDS} s"
    assert not output.parent.exists(), "a refused import writes nothing"
    return done["result"], done["seconds"]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_hostile_script_is_refused_with_one_line(cli, tmp_path, case):
    name, text, says, line = case
    result, seconds = refused_in_time(cli, tmp_path, f"{name}.py", HEAD + text + TAIL)
    refused = assert_refused(result, ManifestError, f"{name}.py{line}", says, "never runs it")
    assert seconds < 15, seconds
    assert len(refused) < 300 and SECRET not in result.stdout + result.stderr
    assert not files_containing(tmp_path, [SECRET.encode()])


NOTEBOOKS = [
    ("deep_json", '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("source_mapping", _notebook({"a": 1}), "cell 1: 'source' must be text or a list of lines, not dict"),
    ("source_list_with_mapping", _notebook(["x = 1\n", {"a": 1}]), "cell 1: 'source' must be text or a list of lines"),
    ("cells_mapping", json.dumps({"cells": {"a": 1}}), "no list of 'cells'"),
    ("top_level_list", "[1, 2]", "no list of 'cells'"),
    (
        "deep_code_in_cell_2",
        _notebook("x = 1\n", "y = 1" + "+1" * 100_000),
        "cell 2:1: an expression nested too deeply",
    ),
    ("value_doubled_in_cell", _notebook(HEAD, doubled("S = 'ab'", "S = S + S")), "cell 2:"),
    ("code_over_budget", _notebook(*["x = 1\n" * 1000] * 25), "more than 20,000 lines"),
]


@pytest.mark.parametrize("case", NOTEBOOKS, ids=[case[0] for case in NOTEBOOKS])
def test_hostile_notebook_is_refused_with_one_line(cli, tmp_path, case):
    name, text, says = case
    result, seconds = refused_in_time(cli, tmp_path, f"{name}.ipynb", text)
    assert_refused(result, ManifestError, f"{name}.ipynb", says)
    assert seconds < 15, seconds


def test_a_notebook_file_is_read_only_up_to_its_limit(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(budget, "MAX_NOTEBOOK_BYTES", 1000)
    result, _ = refused_in_time(cli, tmp_path, "big.ipynb", _notebook("x = 1\n" * 200))
    assert_refused(result, ManifestError, "big.ipynb: larger than", "never runs it")


def test_what_stays_within_the_budget_is_still_computed(tmp_path):
    """The budget refuses sizes, not arithmetic: small values are computed as before, and a
    width taken from the arguments (`%*d`) is left unresolved instead of computed."""
    from runner.importer.interp import read_script
    from runner.importer.source import read_python

    source = tmp_path / "job.py"
    source.write_text(
        "S = 'ab' * 3\nL = [S, S] + [1]\nF = f'{7:>4}|{2.5:.2f}'\nP = '%5d' % 42\nQ = '%*d' % (999999999, 1)\nX = 3 * 3"
        " ** 4\n"
    )
    names = read_script(read_python(source, "job.py")).names
    assert (names["S"], names["L"], names["F"], names["P"], names["X"]) == (
        "ababab",
        ["ababab", "ababab", 1],
        "   7|2.50",
        "   42",
        243,
    )
    assert type(names["Q"]).__name__ == "Unknown"


def test_the_budget_holds_on_a_slow_machine(tmp_path, monkeypatch):
    """The wall clock stands behind the step count."""
    from runner.importer.interp import read_script
    from runner.importer.source import read_python

    monkeypatch.setattr(budget, "MAX_SECONDS", -1.0)
    source = tmp_path / "job.py"
    source.write_text("x = 1\n" * 5000)
    with pytest.raises(ManifestError, match=r"job\.py:\d+: reading took more than -1 s"):
        read_script(read_python(source, "job.py"))


def test_objects_chained_or_holding_themselves_are_shown_shallowly(cli, tmp_path):
    """`x = x.a` 3,000 times, `x.a = x`: what the report shows of an SDK object never walks into it."""
    (tmp_path / "train.py").write_text("print(1)\n")
    head = "from azureml.core import ScriptRunConfig, Workspace\nws = Workspace.from_config()\nx = ws.a\ny = x\n"
    job = "src = ScriptRunConfig(source_directory='.', script='train.py', arguments=['--p', y], environment=y)\n"
    for body in ("x = x.a\n" * 3000, "x.a = x\nx.b = [x, x]\n"):
        (tmp_path / "job.py").write_text(head + body + job)
        output = tmp_path / "out" / "tftrain.yml"
        with nothing_written_outside(tmp_path, output.parent):
            result = cli("import", "azureml", str(tmp_path / "job.py"), "-o", str(output), "--force", cwd=tmp_path)
        assert_clean(result)
        assert "# --p:  # TODO(tftrain import): a(…) at ../job.py:2" in output.read_text()  # the line of ws
