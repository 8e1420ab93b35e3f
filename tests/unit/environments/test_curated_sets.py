"""The curated TensorFlow sets: one per release in the framework table, each pinning the
packages that make a working TensorFlow, and the manifest warnings about leaving them out."""

from __future__ import annotations

import pytest

from runner.frameworks.curated import (
    CONSTRAINTS_DIR,
    constraint_set,
    constraints_for,
    parse_set,
    released_sets,
    requirement_names,
    set_path,
)
from runner.frameworks.releases import DEFAULT_VERSION, FRAMEWORKS, uses_keras3
from runner.manifest import load_manifest

RELEASES = [f"2.{minor}" for minor in range(12, 22)]


def test_the_table_runs_from_2_12_to_2_21():
    assert list(FRAMEWORKS) == RELEASES
    newest = FRAMEWORKS["2.21"]
    assert (newest.python, newest.cuda, newest.cudnn) == ("3.10-3.13", "12.5", "9.3")
    low, high = (tuple(map(int, end.split("."))) for end in newest.python.split("-"))
    assert low <= (3, 11) <= high  # the Python the sets are made with


def test_every_release_has_a_set_and_nothing_else_does():
    assert released_sets() == RELEASES
    assert sorted(path.name for path in CONSTRAINTS_DIR.iterdir()) == sorted(f"tensorflow-{r}.txt" for r in RELEASES)


@pytest.mark.parametrize("release", RELEASES)
def test_each_set_pins_the_packages_of_a_working_tensorflow(release):
    found = constraint_set(release)
    assert found is not None and found.release == release and found.path == set_path(release)
    pins = dict(found.pins)
    # ml-dtypes: a TensorFlow dependency from 2.14 on (2.12 and 2.13 do not use it)
    wanted = ("tensorflow-cpu", "tensorflow", "keras", "numpy", "protobuf", "tensorboard", "tensorboard-data-server")
    for name in (*wanted, *(("ml-dtypes",) if tuple(map(int, release.split("."))) >= (2, 14) else ())):
        assert name in pins, f"{release}: {name} is not pinned"
    assert pins["tensorflow"] == pins["tensorflow-cpu"] and pins["tensorflow"].startswith(release + ".")
    keras_major = int(pins["keras"].split(".")[0])
    if uses_keras3(release):  # Keras 3 ships; tf-keras of the same minor for Horovod's Keras API
        assert keras_major == 3 and pins["tf-keras"].startswith(release + ".")
    else:  # Keras 2 is TensorFlow's own dependency, of the same minor
        assert pins["keras"].startswith(release + ".") and "tf-keras" not in pins
    if release != "2.21":  # TensorFlow ≤ 2.20 requires tensorboard~=its own release; 2.21 none
        assert pins["tensorboard"].startswith(release + ".")
    header = [line for line in found.text.splitlines() if line.startswith("#")]
    assert any("Smoke test (runner/environments/smoke.py): passed" in line for line in header)
    assert any(f"tensorflow-cpu=={release}.*" in line for line in header)


def test_a_set_reads_exact_pins_only(tmp_path):
    good = parse_set("2.18", tmp_path / "x.txt", "# made by hand\n\nNumPy==2.0.2\ntensorflow_cpu==2.18.1\n")
    assert good.pins == (("numpy", "2.0.2"), ("tensorflow-cpu", "2.18.1"))
    with pytest.raises(ValueError, match=r"x.txt:2: not an exact pin \(name==version\): numpy>=2"):
        parse_set("2.18", tmp_path / "x.txt", "keras==3.1\nnumpy>=2\n")


def test_the_set_covers_its_release_and_its_own_patch_only():
    found = constraint_set("2.18")
    assert found.covers("2.18") and found.covers(found.tensorflow) and not found.covers("2.18.0")
    assert constraint_set(None) == constraint_set(DEFAULT_VERSION)
    assert constraint_set("2.11") is None and constraint_set("3.0") is None
    assert constraints_for("2.18.0") is None and constraints_for("2.11") is None


def test_what_the_user_lists_is_left_out_of_the_constraints():
    def names(text: str) -> set[str]:
        return {line.split("==")[0] for line in text.splitlines()}

    full = names(constraints_for("2.21"))
    assert {"numpy", "keras", "tf-keras", "tensorflow-cpu"} <= full
    mine = names(constraints_for("2.21", ["numpy<2  # mine", "Keras[backend]>=3", "-r other.txt", "six"]))
    assert full - mine == {"numpy", "keras"}
    assert requirement_names(["tf_keras==2.18.0 ; python_version>'3'", "--index-url x", "  "]) == {"tf-keras"}


def warnings_of(project, manifest: str) -> list[str]:
    return list(load_manifest(project(manifest=manifest)).warnings)


def test_an_unpinned_tensorflow_in_pip_packages_names_framework_version(project):
    unpinned, ranged = warnings_of(
        project,
        "framework_version: '2.18'\npip_packages: [six, tensorflow, 'tensorflow-cpu>=2.15',"
        " 'tensorflow-gpu==2.18.1']\n",
    )
    assert (
        ":5: pip_packages[1]: `tensorflow` is unpinned: pip installs the release the registry serves that day, not "
        "framework_version (2.18, its tested set); remove it (tftrain installs TensorFlow from framework_version) "
        "or pin an exact version with ==" in unpinned
    )
    assert "pip_packages[2]: `tensorflow-cpu` is unpinned" in ranged
    assert warnings_of(project, "pip_packages: ['tensorflow==2.16.1', six]\n") == []
    assert (
        "framework_version (2.18, its tested set)" in warnings_of(project, "pip_packages: ['tensorflow==2.18.*']\n")[0]
    )
    assert (
        "framework_version (2.11);"
        in warnings_of(project, "framework_version: '2.11'\npip_packages: [tensorflow]\n")[0]
    )
    assert warnings_of(project, "user_managed: true\nframework_version: '2.11'\n") == []  # tftrain installs nothing


def test_a_patch_other_than_the_sets_installs_without_it(project):
    pinned = constraint_set("2.18").tensorflow
    assert warnings_of(project, f"framework_version: '{pinned}'\n") == []
    (warning,) = warnings_of(project, "framework_version: '2.18.0'\n")
    assert (
        f":4: framework_version: 2.18.0 is not the patch of the tested 2.18 set ({pinned}): tftrain installs "
        f"TensorFlow 2.18.0 without the set's pins; write '2.18' or '{pinned}' to use the set" in warning
    )
    # an official image brings its own TensorFlow: nothing to say
    assert warnings_of(project, "framework_version: '2.18.0'\nuse_docker: true\n") == []


def test_a_release_without_a_set_is_a_warning(project):
    (warning,) = warnings_of(project, "framework_version: '2.11'\n")
    assert (
        ":4: framework_version: TensorFlow 2.11 has no tested set (tftrain's releases: 2.12 to 2.21): "
        "pip resolves its packages as the registry serves them" in warning
    )


def test_the_refresh_writes_the_set_from_pip_freeze_and_the_smoke_result():
    from runner.environments.refresh import RefreshFailed, render

    frozen = (
        "absl-py==2.1.0\nKeras==3.15.1\nml_dtypes==0.6.0\nnumpy==2.0.2\nprotobuf==5.29.6\ntensorboard==2.18.0\n"
        "tensorflow-cpu==2.18.1\ntf_keras==2.18.0\n"
    )
    checks = [("Smoke test", {}, {"summary": "ok", "tensorflow": "2.18.1"})]
    text = render("2.18", frozen, ["tensorflow-cpu==2.18.* tensorboard"], checks)
    found = parse_set("2.18", set_path("2.18"), text)
    assert dict(found.pins) == {
        "keras": "3.15.1",
        "ml-dtypes": "0.6.0",
        "numpy": "2.0.2",
        "protobuf": "5.29.6",
        "tensorboard": "2.18.0",
        "tensorflow": "2.18.1",
        "tensorflow-cpu": "2.18.1",
        "tf-keras": "2.18.0",
    }  # absl-py is TensorFlow's to choose; tensorflow is added at tensorflow-cpu's version
    assert '# Smoke test (runner/environments/smoke.py): passed {"summary": "ok", "tensorflow": "2.18.1"}' in text
    assert "#   pip install tensorflow-cpu==2.18.* tensorboard" in text
    with pytest.raises(RefreshFailed, match="2.17: pip freeze shows tensorflow-cpu 2.18.1"):
        render("2.17", frozen, [], checks)


def test_the_refresh_names_only_releases_of_the_table(capsys):
    from runner.environments.refresh import main

    with pytest.raises(SystemExit):
        main(["2.18", "2.11"])
    assert "not in the framework table: 2.11" in capsys.readouterr().err
