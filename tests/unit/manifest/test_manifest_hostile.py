"""Hostile manifests: each one is refused with one line `FILE:LINE: field: message` per problem.

Every case runs `load_manifest` in this process: no traceback, no other exception, and (the
billion laughs, the self-referencing alias, thousands of brackets) nothing that runs long or
grows large, since the loader counts what it builds while it reads.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from runner.environments.virtualenv import env_spec
from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.manifest.loading import MAX_BYTES
from runner.training.snapshot import take_snapshot

HEADER = "name: demo\nsource_directory: src\nentry_script: train.py\n"


@dataclass(frozen=True)
class Link:
    """A symlink to create; `{outside}` in its target is a directory outside the project."""

    target: str


@dataclass(frozen=True)
class Case:
    id: str
    body: str | bytes  # after HEADER, unless `whole`
    problems: tuple[tuple[str, str], ...]  # (field, a fragment of its message), one per line
    files: tuple[tuple[str, str | bytes | Link], ...] = ()
    whole: bool = False


def laughs(levels: int, width: int = 9) -> str:
    lines = ["script_params:", "  l0: &l0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def laughs_mapping(levels: int) -> str:
    lines = ["environment_variables: &m0 {A: lol, B: lol, C: lol}", "script_params:"]
    for level in range(1, levels):
        lines.append(
            f"  k{level}: &m{level} {{a: *m{level - 1}, b: *m{level - 1}, c: *m{level - 1}, d: *m{level - 1}}}"
        )
    return "\n".join(lines) + "\n"


CASES = [
    # --- expansion, depth, recursion -------------------------------------------------------------
    Case(
        "billion_laughs_9_levels",
        laughs(9),
        (("script_params.l4[1]", "more than 20000 values once aliases are expanded"),),
    ),
    Case("billion_laughs_7_levels", laughs(7), (("script_params.l4[1]", "more than 20000 values"),)),
    Case("laughs_through_mappings", laughs_mapping(12), (("script_params.k6.b", "more than 20000 values"),)),
    Case(
        "laughs_through_long_text",
        "script_params:\n  a: &a '" + "x" * 200_000 + "'\n  b: &b [" + ", ".join(["*a"] * 20) + "]\n",
        (("script_params.b[9]", "more than 2 MiB of text once aliases are expanded"),),
    ),
    Case(
        "recursive_alias_mapping",
        "script_params: &a {--x: *a}\n",
        (("script_params.--x", "alias *a refers to a value that contains it"),),
    ),
    Case(
        "recursive_alias_list",
        "pip_packages: &a [a, *a]\n",
        (("pip_packages[1]", "alias *a refers to a value that contains it"),),
    ),
    Case("undefined_alias", "use_gpu: *nope\n", (("use_gpu", "alias *nope has no anchor &nope before it"),)),
    Case(
        "nested_flow_lists_500",
        "script_params: {--x: " + "[" * 500 + "]" * 500 + "}\n",
        (("script_params.--x" + "[0]" * 14, "nested deeper than 16 levels"),),
    ),
    Case(
        "nested_block_mappings_100",
        "".join(f"{'  ' * i}k{i}:\n" for i in range(100)) + "  " * 100 + "v: 1\n",
        ((".".join(f"k{i}" for i in range(16)), "nested deeper than 16 levels"),),
    ),
    Case(
        "alias_nests_too_deep",
        "script_params:\n  a: &d " + "[" * 10 + "]" * 10 + "\n  b: [[[[[[[*d]]]]]]]\n",
        (("script_params.b[0][0][0][0][0][0][0]", "alias *d nests deeper than 16 levels"),),
    ),
    # --- NUL bytes, '=' and other names that break a spawn -----------------------------------------
    Case(
        "nul_in_entry_script",
        'name: demo\nsource_directory: src\nentry_script: "tr\\0ain.py"\n',
        (("entry_script", "contains a NUL character"),),
        whole=True,
    ),
    Case(
        "nul_in_source_directory",
        'name: demo\nsource_directory: "s\\0rc"\nentry_script: train.py\n',
        (("source_directory", "contains a NUL character"),),
        whole=True,
    ),
    Case(
        "nul_in_env_value",
        'environment_variables: {A: "x\\0y"}\n',
        (("environment_variables.A", "the value contains a NUL character"),),
    ),
    Case(
        "nul_in_script_param_value",
        'script_params: {--x: "a\\0b"}\n',
        (("script_params.--x", "the value contains a NUL character"),),
    ),
    Case(
        "nul_in_script_param_key",
        'script_params: {"--x\\0": 1}\n',
        (("script_params", "a key contains a NUL character"),),
    ),
    Case("nul_in_input_name", 'inputs: {"d\\0": {source: .}}\n', (("inputs", "a key contains a NUL character"),)),
    Case("equals_in_input_name", "inputs: {a=b: {source: .}}\n", (("inputs.a=b", "'a=b' is not a valid input name"),)),
    Case(
        "slash_in_input_name",
        "inputs: {../up: {source: .}}\n",
        (("inputs.../up", "'../up' is not a valid input name"),),
    ),
    Case(
        "input_names_that_collide",
        "inputs: {a-b: {source: .}, a_b: {source: .}}\n",
        (("inputs.a_b", "'a_b' and 'a-b' both become $TFTRAIN_INPUT_A_B"),),
    ),
    Case(
        "equals_in_env_name",
        "environment_variables: {A=B: x}\n",
        (("environment_variables.A=B", "'A=B' is not a valid environment variable name"),),
    ),
    Case(
        "line_separator_in_env_name",
        'environment_variables: {"A\\u2028B": x}\n',
        (("environment_variables.'A\\u2028B'", "is not a valid environment variable name"),),
    ),
    Case(
        "argument_too_long_for_the_kernel",
        "script_params: {--x: '" + "y" * 140_000 + "'}\n",
        (("script_params.--x", "an argument longer than 128 KiB cannot be passed"),),
    ),
    Case(
        "pip_package_that_is_an_option",
        "pip_packages: [numpy, -r /etc/hostname]\n",
        (("pip_packages[1]", "'-r /etc/hostname' is not a package (options belong in pip_requirements_file)"),),
    ),
    Case(
        "pip_package_with_a_second_line",
        'pip_packages: ["numpy\\n--index-url http://example.invalid"]\n',
        (("pip_packages[0]", "is not a package"),),
    ),
    Case(
        "conda_package_that_is_an_option",
        "conda_packages: [--override-channels]\n",
        (("conda_packages[0]", "is not a package"),),
    ),
    # --- paths that leave the source directory ----------------------------------------------------
    Case(
        "requirements_absolute",
        "pip_requirements_file: /etc/hostname\n",
        (("pip_requirements_file", "'/etc/hostname' must be a relative path that stays inside its directory"),),
    ),
    Case(
        "requirements_through_symlink",
        "pip_requirements_file: req.txt\n",
        (("pip_requirements_file", "'req.txt' leads outside"),),
        files=(("src/req.txt", Link("/etc/hostname")),),
    ),
    Case(
        "requirements_not_utf8",
        "pip_requirements_file: req.txt\n",
        (("pip_requirements_file", "'req.txt' is not UTF-8 text (byte 0xff on line 2)"),),
        files=(("src/req.txt", b"numpy\n\xff\xfe\n"),),
    ),
    Case(
        "requirements_a_directory",
        "pip_requirements_file: reqs\n",
        (("pip_requirements_file", "'reqs' in source_directory"),),
        files=(("src/reqs/x", "x"),),
    ),
    Case(
        "requirements_too_large",
        "pip_requirements_file: req.txt\n",
        (("pip_requirements_file", "is larger than 1 MiB"),),
        files=(("src/req.txt", "a\n" * (600 << 10)),),
    ),
    Case(
        "conda_file_outside",
        "conda_dependencies_file: ../env.yml\n",
        (("conda_dependencies_file", "must be a relative path"),),
    ),
    Case(
        "entry_script_parent",
        "name: demo\nsource_directory: src\nentry_script: ../evil.py\n",
        (("entry_script", "must be a relative path that stays inside"),),
        whole=True,
    ),
    Case(
        "entry_script_symlink_outside",
        "name: demo\nsource_directory: src\nentry_script: link.py\n",
        (("entry_script", "'link.py' leads outside"),),
        files=(("src/link.py", Link("{outside}/evil.py")),),
        whole=True,
    ),
    Case(
        "entry_script_symlink_loop",
        "name: demo\nsource_directory: src\nentry_script: loop.py\n",
        (("entry_script", "'loop.py' cannot be resolved"),),
        files=(("src/loop.py", Link("loop.py")),),
        whole=True,
    ),
    Case(
        "entry_script_name_too_long",
        "name: demo\nsource_directory: src\nentry_script: " + "a" * 300 + ".py\n",
        (("entry_script", "not found in source_directory"),),
        whole=True,
    ),
    Case(
        "entry_script_in_outputs",
        "name: demo\nsource_directory: src\nentry_script: outputs/train.py\n",
        (("entry_script", "is inside outputs_dir 'outputs', which is not copied into the run"),),
        files=(("src/outputs/train.py", "x"),),
        whole=True,
    ),
    Case(
        "outputs_through_symlink",
        "outputs_dir: sub/out\nmodel: {path: sub/out/model}\n",
        (("outputs_dir", "'sub/out' goes through the symlink 'sub'"),),
        files=(("src/sub", Link("{outside}")),),
    ),
    Case(
        "logs_through_symlink_inside",
        "logs_dir: sub/logs\n",
        (("logs_dir", "goes through the symlink 'sub'"),),
        files=(("src/real/x", "x"), ("src/sub", Link("real"))),
    ),
    Case(
        "outputs_through_a_file",
        "outputs_dir: f/out\nmodel: {path: f/out/model}\n",
        (("outputs_dir", "which is not a directory"),),
        files=(("src/f", "x"),),
    ),
    Case(
        "outputs_and_logs_absolute",
        "outputs_dir: /tmp/out\nlogs_dir: /tmp/logs\n",
        (("outputs_dir", "must be a relative path"), ("logs_dir", "must be a relative path")),
    ),
    Case(
        "outputs_dir_is_the_source",
        "outputs_dir: .\n",
        (("outputs_dir", "must name a directory below the source directory"),),
    ),
    Case("model_path_escapes", "model: {path: outputs/../../x}\n", (("model.path", "must stay inside outputs_dir"),)),
    # --- types are strict ------------------------------------------------------------------------
    Case(
        "bool_is_no_integer",
        "max_run_duration_seconds: true\n",
        (("max_run_duration_seconds", "Input should be a valid integer"),),
    ),
    Case("string_is_no_bool", "use_gpu: 'yes'\n", (("use_gpu", "Input should be a valid boolean"),)),
    Case("string_is_no_integer", "node_count: '2'\n", (("node_count", "Input should be a valid integer"),)),
    Case(
        "number_is_no_name",
        "name: 123\nsource_directory: src\nentry_script: train.py\n",
        (("name", "Input should be a valid string"),),
        whole=True,
    ),
    Case("infinite_grace", "compute: {kill_grace_seconds: .inf}\n", (("compute.kill_grace_seconds", "finite number"),)),
    Case(
        "huge_int_digits",
        "script_params: {--x: " + "9" * 5000 + "}\n",
        (("script_params.--x", "a number of 5000 characters is too long"),),
    ),
    Case(
        "huge_sexagesimal", "node_count: " + ":".join(["59"] * 40) + "\n", (("node_count", "characters is too long"),)
    ),
    Case(
        "huge_node_count",
        "node_count: 1000000000000000000000000000000\n",
        (("node_count", "less than or equal to 1024"),),
    ),
    Case(
        "huge_duration",
        "max_run_duration_seconds: 99999999999999\n",
        (("max_run_duration_seconds", "less than or equal to"),),
    ),
    Case(
        "huge_worker_count",
        "distributed_training: {backend: multi_worker_mirrored, worker_count: 100000}\n",
        (("distributed_training.worker_count", "less than or equal to 4096"),),
    ),
    Case(
        "too_many_processes",
        "node_count: 1024\ndistributed_training: {backend: mpi, process_count_per_node: 1024}\n",
        (("distributed_training", "1048576 processes; at most 4096"),),
    ),
    Case(
        "ports_past_65535",
        "distributed_training: {backend: multi_worker_mirrored, worker_count: 600, base_port: 65000}\n",
        (("distributed_training.base_port", "600 tasks from port 65000 run past port 65535"),),
    ),
    Case("size_with_endless_digits", "shm_size: '" + "9" * 40 + "g'\n", (("shm_size", "String should match pattern"),)),
    # --- one line per problem: merge keys, unions ------------------------------------------------
    Case("merge_key_brings_an_unknown_key", "base: &b {use_gpu: false}\n<<: *b\n", (("base", "unknown key"),)),
    Case(
        "merge_key_into_the_wrong_backend",
        "compute: &c {slots_per_node: 2}\ndistributed_training:\n  <<: *c\n  backend: mpi\n",
        (("distributed_training.slots_per_node", "unknown key; did you mean 'process_count_per_node'?"),),
    ),
    Case(
        "merge_key_of_a_scalar",
        "script_params:\n  <<: 3\n",
        (("script_params.<<", "a merge key (<<) takes a mapping or a list of mappings"),),
    ),
    Case(
        "param_of_no_form",
        "script_params: {--x: {a: 1}}\n",
        (("script_params.--x", "must be a string, number, boolean, null, a list of those"),),
    ),
    Case(
        "param_list_with_a_mapping",
        "script_params: {--x: [1, {a: 1}]}\n",
        (("script_params.--x[1]", "must be a string, number or boolean"),),
    ),
    Case(
        "input_ref_of_wrong_type",
        "script_params: {--x: {input: 3}}\n",
        (("script_params.--x.input", "Input should be a valid string"),),
    ),
    Case(
        "env_value_list",
        "environment_variables: {A: [1]}\n",
        (("environment_variables.A", "must be a string, number or boolean"),),
    ),
    Case(
        "backend_key_of_another_backend",
        "distributed_training: {backend: mpi, worker_count: 3}\n",
        (("distributed_training.worker_count", "unknown key; allowed keys: backend, hostfile, launcher"),),
    ),
    Case(
        "two_problems_two_lines",
        "use_gpuu: true\nnode_count: 0\n",
        (("use_gpuu", "unknown key"), ("node_count", "greater than or equal to 1")),
    ),
    # --- metrics ---------------------------------------------------------------------------------
    Case(
        "metrics_rank_of_a_one_process_job",
        "metrics: {ranks: [5]}\n",
        (("metrics.ranks[0]", "5 is not a rank of this job (ranks 0–0)"),),
    ),
    Case("metrics_negative_rank", "metrics: {ranks: [-1]}\n", (("metrics.ranks[0]", "greater than or equal to 0"),)),
    Case("metrics_no_rank", "metrics: {ranks: []}\n", (("metrics.ranks", "at least 1 item"),)),
    Case(
        "regex_that_recurses",
        "metrics: {regex: {acc: '" + "(" * 2000 + ")" * 2000 + "'}}\n",
        (("metrics.regex", "acc: invalid regular expression: maximum recursion depth exceeded"),),
    ),
    Case(
        "regex_with_a_huge_repeat",
        "metrics: {regex: {acc: 'a{99999999999}(x)'}}\n",
        (("metrics.regex", "acc: invalid regular expression: the repetition number is too large"),),
    ),
    # --- YAML itself -----------------------------------------------------------------------------
    Case("tab_indentation", "compute:\n\tslots_per_node: 2\n", (("(top level)", "invalid YAML"),)),
    Case(
        "control_character",
        "name: de\x01mo\n",
        (("(top level)", "invalid YAML: character U+0001 is not allowed"),),
        whole=True,
    ),
    Case("lone_surrogate_escape", 'script_params: {--x: "\\ud800"}\n', (("script_params", "invalid YAML"),)),
    Case(
        "a_list_document",
        "- name: demo\n",
        (("(top level)", "the manifest must be a mapping of keys to values"),),
        whole=True,
    ),
    Case(
        "a_scalar_document",
        "just text\n",
        (("(top level)", "the manifest must be a mapping of keys to values"),),
        whole=True,
    ),
    Case("a_null_document", "~\n", (("(top level)", "the manifest must be a mapping of keys to values"),), whole=True),
    Case("empty_file", "", (("(top level)", "the manifest is empty"),), whole=True),
    Case("only_comments", "# nothing\n\n", (("(top level)", "the manifest is empty"),), whole=True),
    Case("two_documents", "---\nuse_gpu: false\n", (("(top level)", "only one YAML document is allowed"),)),
    Case(
        "python_object_tag",
        "script_params: {--x: !!python/object/apply:os.system [id]}\n",
        (("script_params.--x", "tag !!python/object/apply:os.system is not allowed"),),
    ),
    Case(
        "python_name_tag",
        "use_gpu: !!python/name:os.system ''\n",
        (("use_gpu", "tag !!python/name:os.system is not allowed"),),
    ),
    Case(
        "custom_tag",
        "name: !secret demo\nsource_directory: src\nentry_script: train.py\n",
        (("name", "tag !secret is not allowed"),),
        whole=True,
    ),
    Case(
        "binary_tag",
        "script_params: {--x: !!binary aGVsbG8=}\n",
        (("script_params.--x", "tag !!binary is not allowed"),),
    ),
    Case("set_tag", "pip_packages: !!set {a, b}\n", (("pip_packages", "tag !!set is not allowed"),)),
    Case("bad_explicit_int", "node_count: !!int two\n", (("node_count", "'two' is not a valid int"),)),
    Case("complex_key", "? [a, b]\n: 1\n", (("(top level)", "keys must be plain values"),)),
    Case("duplicate_key", "use_gpu: false\nuse_gpu: true\n", (("use_gpu", "duplicate key 'use_gpu'"),)),
    Case(
        "homoglyph_key",
        "n\u0430me: demo\nsource_directory: src\nentry_script: train.py\n",
        (("n\u0430me", "unknown key; did you mean 'name'?"), ("name", "required key is missing")),
        whole=True,
    ),
    Case("binary_file", bytes(range(256)) * 4, (("(top level)", "not UTF-8 text (byte 0x80)"),), whole=True),
    Case("utf16_file", "name: demo\n".encode("utf-16"), (("(top level)", "not UTF-8 text"),), whole=True),
]


def make_project(tmp_path: Path, case: Case) -> Path:
    root, outside = tmp_path / "project", tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (outside / "evil.py").write_text("print('evil')\n")
    (root / "src" / "train.py").write_text("print('hello')\n")
    for rel, content in case.files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            path.symlink_to(content.target.format(outside=outside))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    manifest = root / "tftrain.yml"
    body = (
        case.body
        if case.whole
        else (HEADER.encode() + case.body if isinstance(case.body, bytes) else HEADER + case.body)
    )
    if isinstance(body, bytes):
        manifest.write_bytes(body)
    else:
        manifest.write_text(body, encoding="utf-8")
    return manifest


def refused(path: Path) -> list[str]:
    """The error's lines; each is one printable line that names the file."""
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    text = str(info.value)
    lines = text.split("\n")
    assert text.splitlines() == lines  # no other line breaks (\r, U+2028, …) inside a line
    for line in lines:
        assert line.startswith(f"{path}:") or line.startswith(f"{path}: "), line
        assert line.isprintable(), line
    return lines


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
def test_hostile_manifest_is_one_line_per_problem(tmp_path, case):
    path = make_project(tmp_path, case)
    lines = refused(path)
    assert len(lines) == len(case.problems), lines
    for field, fragment in case.problems:
        prefix = re.compile(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: ")
        assert [line for line in lines if prefix.match(line) and fragment in line], (lines, field, fragment)


def test_the_case_list_is_broad():
    assert len(CASES) >= 70 and len({case.id for case in CASES}) == len(CASES)


def fifo(path: Path) -> None:
    """A FIFO, and a writer that opens and closes it once a reader waits: a reader that blocks
    (instead of refusing the FIFO) gets an empty file then, instead of hanging the test."""
    os.mkfifo(path)

    def writer() -> None:
        for _ in range(100):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                return
            except OSError:  # no reader yet (ENXIO)
                time.sleep(0.05)

    threading.Thread(target=writer, daemon=True).start()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: path.mkdir(), "is a directory, not a YAML file"),
        (lambda path: fifo(path), "is not a regular file"),
        (lambda path: path.write_text(HEADER + "#" * MAX_BYTES), "larger than 1 MiB; a manifest is a few lines"),
        (lambda path: path.symlink_to(path), "cannot read: Too many levels of symbolic links"),
        (lambda path: None, "manifest not found (give another path with -f)"),
    ],
    ids=["directory", "fifo", "too_large", "symlink_loop", "missing"],
)
def test_a_file_that_is_no_manifest_is_one_line(tmp_path, make, message):
    """Problems of the file itself have no line: `FILE: message`. A FIFO never blocks the read."""
    path = tmp_path / "tftrain.yml"
    make(path)
    assert refused(path) == [f"{path}: {message}"]


def test_bom_tabs_inside_values_and_odd_unicode_are_fine(tmp_path):
    """What looks odd but is valid YAML loads: a BOM, tabs inside quoted text, right-to-left text, emoji."""
    path = make_project(tmp_path, Case("benign", 'script_params:\n  --note: "a\\tb \u202eevil\u202c \U0001f600"\n', ()))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_manifest(path).manifest.script_params["--note"] == "a\tb \u202eevil\u202c \U0001f600"


def test_anchors_aliases_and_merge_keys_that_stay_small_load(tmp_path):
    body = (
        "environment_variables: &env {A: '1', B: '2'}\nscript_params:\n  <<: [{--lr: 0.1, --epochs: 3}, {--lr: 0.5,"
        " --seed: 7}]\n  --epochs: 5\n  --layers: &l [64, 32]\n  --again: *l\n"
    )
    manifest = load_manifest(make_project(tmp_path, Case("aliases", body, ()))).manifest
    assert manifest.script_params == {
        "--lr": 0.1,
        "--epochs": 5,
        "--seed": 7,
        "--layers": [64, 32],
        "--again": [64, 32],
    }
    assert manifest.environment_variables == {"A": "1", "B": "2"}


def test_the_parameter_server_rule_is_the_same_on_every_machine(tmp_path):
    """1 worker + 1 ps on one 2-CPU node (a valid Azure ML configuration) loads whatever this machine has."""
    body = (
        "compute: {slots_per_node: 2}\ndistributed_training: {backend: parameter_server, worker_count: 1,"
        " parameter_server_count: 1}\n"
    )
    assert load_manifest(make_project(tmp_path, Case("ps", body, ()))).manifest.distributed_training is not None


def test_the_snapshot_refuses_an_outputs_dir_through_a_symlink(tmp_path):
    """The source can change after validation: the snapshot checks again, before it makes the link."""
    source, outside = tmp_path / "src", tmp_path / "outside"
    source.mkdir()
    outside.mkdir()
    (source / "train.py").write_text("")
    (source / "sub").symlink_to(outside)
    with pytest.raises(ManifestError, match=r"outputs_dir/logs_dir 'sub/out' goes through a symlink 'sub'"):
        take_snapshot(source, tmp_path / "snap", exclude=("sub/out", "logs"))
    assert not (tmp_path / "snap" / "sub").is_symlink()
    (source / "sub").unlink()
    (source / "sub").write_text("a file")
    with pytest.raises(ManifestError, match=r"goes through a file 'sub'"):
        take_snapshot(source, tmp_path / "snap2", exclude=("sub/out", "logs"))


def test_a_symlinked_outputs_dir_itself_is_left_out_of_the_snapshot(tmp_path):
    source, outside = tmp_path / "src", tmp_path / "outside"
    source.mkdir()
    outside.mkdir()
    (source / "train.py").write_text("")
    (source / "outputs").symlink_to(outside)
    take_snapshot(source, tmp_path / "snap", exclude=("outputs", "logs"))
    assert not (tmp_path / "snap" / "outputs").exists()


def test_the_requirements_file_is_checked_again_when_the_environment_is_made(tmp_path):
    """Validated, then swapped: the environment reads it through the same check (one line, no traceback)."""
    path = make_project(
        tmp_path, Case("requirements", "pip_requirements_file: req.txt\n", (), files=(("src/req.txt", "six\n"),))
    )
    loaded = load_manifest(path)
    requirements = loaded.source_dir / "req.txt"
    requirements.write_bytes(b"six\n\xff\n")
    with pytest.raises(
        ManifestError, match=r"^pip_requirements_file: 'req.txt' is not UTF-8 text \(byte 0xff on line 2\)$"
    ):
        env_spec(loaded.manifest, loaded.source_dir)
    requirements.unlink()
    requirements.symlink_to("/etc/hostname")
    with pytest.raises(ManifestError, match=r"^pip_requirements_file: 'req.txt' leads outside "):
        env_spec(loaded.manifest, loaded.source_dir)
