"""References parsed in one place (runner/refs.py): one spelling per run number and version,
every number SQLite is handed fits its INTEGER, anything else names nothing."""

from __future__ import annotations

import pytest

from runner.errors import NotFoundError
from runner.shared.refs import (
    MAX_DIGITS,
    ModelRef,
    RunRef,
    number,
    resume_ref_problem,
    run_number,
    shown,
    version_of_dir,
)

LARGEST = "9" * MAX_DIGITS
HUGE = "9" * 23


def test_the_largest_number_and_its_successor_fit_sqlite():
    assert number(LARGEST) + 1 <= 2**63 - 1


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("1", 1),
        ("42", 42),
        (LARGEST, int(LARGEST)),
        ("9" * (MAX_DIGITS + 1), None),
        (HUGE, None),
        ("0", None),
        ("01", None),
        ("007", None),
        ("١٢", None),
        ("１２", None),
        ("²", None),
        ("+1", None),
        ("-1", None),
        (" 1", None),
        ("1\n", None),
        ("1_000", None),
        ("", None),
    ],
)
def test_a_number_is_what_tftrain_writes(text, parsed):
    assert number(text) == parsed


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("digits", ModelRef("digits", None)),
        ("digits@latest", ModelRef("digits", None)),
        ("digits@v12", ModelRef("digits", 12)),
        (f"d@v{LARGEST}", ModelRef("d", int(LARGEST))),
    ],
)
def test_model_references(ref, parsed):
    assert ModelRef.parse(ref) == parsed


@pytest.mark.parametrize(
    "ref",
    [f"digits@v{HUGE}", "digits@v0", "digits@v01", "digits@v١", f"digits@v{'9' * 19}", "digits@vx", "digits@v1\n"],
)
def test_a_version_no_model_can_have_is_not_found(ref):
    with pytest.raises(
        NotFoundError, match=r"cannot exist: a version is v1, v2, … \(ASCII digits, no leading zero, at most 18\)"
    ):
        ModelRef.parse(ref)


@pytest.mark.parametrize(
    "ref", ["", "digits@12", "digits@v", "-digits", "digits@v1@v2", "di gits", "dígits", "digits@latest\n"]
)
def test_malformed_model_references_are_not_found(ref):
    with pytest.raises(NotFoundError, match="is not a model reference: use NAME, NAME@vN or NAME@latest"):
        ModelRef.parse(ref)


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("latest", RunRef(latest=True)),
        ("3", RunRef(number=3)),
        ("demo-3", RunRef(run_id="demo-3")),
        (HUGE, RunRef()),
        ("007", RunRef()),
        ("١٢", RunRef()),
        ("0", RunRef()),
    ],
)
def test_run_references(ref, parsed):
    assert RunRef.parse(ref) == parsed
    assert parsed.names_nothing == (parsed == RunRef())


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("demo-3", 3),
        ("a-b-12", 12),
        (f"demo-{HUGE}", None),
        ("demo-03", None),
        ("demo-١", None),
        ("demo", None),
        ("-3", None),
    ],
)
def test_run_numbers_of_directory_names(name, parsed):
    assert run_number(name) == parsed


@pytest.mark.parametrize(
    ("name", "parsed"),
    [("v1", 1), ("v10", 10), (f"v{HUGE}", None), ("v01", None), ("v١", None), ("v", None), ("1", None)],
)
def test_version_numbers_of_directory_names(name, parsed):
    assert version_of_dir(name) == parsed


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        (f"model:demo@v{HUGE}", "model 'demo@v9999"),
        ("model:demo@v01", "cannot exist"),
        ("model:de mo", "is not a model reference"),
        (f"checkpoint:{HUGE}", "run '9999"),
        ("checkpoint:007", "a run number is 1, 2, …"),
    ],
)
def test_resume_from_references_that_can_name_nothing(ref, says):
    assert says in resume_ref_problem(ref)


@pytest.mark.parametrize(
    "ref", ["model:demo@v3", "model:demo", "checkpoint:demo-3", "checkpoint:3", HUGE, "outputs/model", ""]
)
def test_resume_from_references_left_to_the_run(ref):
    assert resume_ref_problem(ref) is None  # a path or run id is looked up when the run starts


def test_a_long_reference_is_shown_cut_and_escaped():
    assert shown("x" * 500) == repr("x" * 80 + "…")
    assert shown("a\nb") == "'a\\nb'"


def test_no_run_or_version_is_numbered_past_what_a_reference_can_name(tmp_path):
    import json

    from runner.errors import HistoryError, RegistryError
    from runner.history.model_registry import Registry
    from runner.history.store import Store

    home = tmp_path / "home"
    (home / "runs" / f"demo-{LARGEST}").mkdir(parents=True)
    (home / "models" / "demo" / f"v{LARGEST}").mkdir(parents=True)
    (tmp_path / "model.bin").write_bytes(b"x")
    with Store(home) as store:
        with pytest.raises(HistoryError, match=f"no run number is left in .* after demo-{LARGEST}"):
            store.new_run("demo", json.dumps({"name": "demo", "entry_script": "train.py"}))
        with pytest.raises(RegistryError, match=f"model demo: no version number is left after v{LARGEST}"):
            Registry(store).register("demo", tmp_path / "model.bin", None, {})
        assert store.runs() == [] and Registry(store).versions() == []
    assert sorted(path.name for path in (home / "runs").iterdir()) == [f"demo-{LARGEST}"]
    assert sorted(path.name for path in (home / "models" / "demo").iterdir()) == [f"v{LARGEST}"]


@pytest.mark.parametrize("tag", ["demo-v01", "demo-v١٢", "demo-v²", f"demo-v{'9' * 23}", "demo-v0"])
def test_a_tag_whose_version_no_reference_can_name_is_no_release_of_the_model(tag):
    """Tags are read by the one number rule (runner.shared.refs): `demo-v١٢` is not v12."""
    from runner.github.workflow import TagTemplate

    assert TagTemplate().version("demo", tag) is None
    assert TagTemplate().version("demo", "demo-v12") == 12
