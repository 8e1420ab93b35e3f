"""What the gate reads of model.path, without TensorFlow (issue 24): links found by one lstat walk
(those leading out of outputs/ and those inside the model refused), and the models it knows — a
Keras JSON config beside its weights (Azure's model.json + model.h5, Keras 3's .weights.h5), never
a JSON alone, a weights file alone, a link, or a JSON too deep or too large to be a config."""

from __future__ import annotations

import json
import os

import pytest

from runner.errors import ModelGateError
from runner.serving.contained import model_links, refuse_leaving, refuse_read_through
from runner.serving.layout import VersionDir
from runner.serving.signature import MAX_KERAS_JSON, ModelFormat, candidates, locate

CONFIG = json.dumps({"class_name": "Sequential", "config": {"name": "sequential", "layers": []}})


def _files(directory, **files: str | bytes):
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = directory / name.replace("__", ".")
        target.write_bytes(content.encode() if isinstance(content, str) else content)
    return directory


@pytest.mark.parametrize("weights", ["model.h5", "model.weights.h5"])
def test_a_keras_json_and_its_weights_are_one_model(tmp_path, weights):
    model = _files(tmp_path / "model", **{"model__json": CONFIG, weights.replace(".", "__"): b"hdf5"})
    found = locate(model)
    assert (found.format, found.relative, found.weights) == (ModelFormat.KERAS_JSON, "model.json", model / weights)


def test_the_only_config_pairs_with_the_only_h5_whatever_their_names(tmp_path):
    model = _files(tmp_path / "model", model_architecture__json=CONFIG, weights__h5=b"hdf5", notes__txt="x")
    assert locate(model).weights.name == "weights.h5"


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"metadata__json": '{"epochs": 3}', "model__h5": b"h"}, (ModelFormat.KERAS, "model.h5")),  # not a Keras config
        ({"model__weights__h5": b"h"}, None),  # weights alone are no model
        ({"model__json": CONFIG}, None),  # a config without weights
        ({"model__json": CONFIG, "model__h5": b"h", "other__keras": b"zip"}, None),  # two models: a guess
        (
            {"model__json": "[" * 100_000 + "]" * 100_000, "model__h5": b"h"},
            (ModelFormat.KERAS, "model.h5"),
        ),  # no RecursionError
        (
            {"model__json": CONFIG, "model__h5": b"h", "model__weights__h5": b"h"},
            (ModelFormat.KERAS, "model.h5"),
        ),  # which weights?
    ],
)
def test_what_is_not_a_pair(tmp_path, files, expected):
    found = locate(_files(tmp_path / "model", **files))
    assert (found.format, found.relative) == expected if expected else found is None


def test_a_json_too_large_to_be_a_config_is_not_read(tmp_path):
    model = _files(tmp_path / "model", model__h5=b"h")
    with open(model / "model.json", "wb") as handle:
        handle.truncate(MAX_KERAS_JSON + 1)  # sparse: no 16 MB written
    assert locate(model).format is ModelFormat.KERAS


def test_a_linked_json_or_weights_file_is_not_paired(tmp_path):
    outside = _files(tmp_path / "outside", model__json=CONFIG, model__h5=b"h")
    model = _files(tmp_path / "model", model__h5=b"h")
    (model / "model.json").symlink_to(outside / "model.json")
    assert locate(model).format is ModelFormat.KERAS  # the linked config is not seen
    (model / "model.h5").unlink()
    (model / "model.h5").symlink_to(outside / "model.h5")
    assert locate(model) is None


def test_a_json_as_model_path_is_no_model_its_weights_would_not_be_registered(tmp_path):
    model = _files(tmp_path / "model", model__json=CONFIG, model__h5=b"h")
    assert locate(model / "model.json") is None


def test_a_version_finds_the_pair_serving_json_names(tmp_path):
    root = tmp_path / "v1"
    _files(root / "model", model__json=CONFIG, model__h5=b"h", other__keras=b"zip")
    _files(root / "serving", serving__json=json.dumps({"path": "model.json"}))
    assert VersionDir(root).located().weights == root / "model" / "model.h5"
    assert [found.relative for found in candidates(root / "model")] == ["model.json", "other.keras"]
    (root / "serving" / "serving.json").write_text(json.dumps({"path": "../../etc"}))
    assert VersionDir(root).located() is None


# --- links ---------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "work" / "outputs" / "model").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "saved_model.pb").write_bytes(b"pb")
    return tmp_path / "work"


def _links(workdir, model="outputs/model"):
    return model_links(workdir, "outputs", model)


@pytest.mark.parametrize(
    "target",
    [
        "{top}/secret/saved_model.pb",
        "../../../secret/saved_model.pb",
        "/nonexistent/x",
        "../../../work/outputs/../../secret/saved_model.pb",
    ],
)
def test_a_link_out_of_outputs_is_refused_by_name(workdir, target):
    (workdir / "outputs" / "model" / "saved_model.pb").symlink_to(target.format(top=workdir.parent))
    with pytest.raises(
        ModelGateError, match=r"^outputs/model/saved_model.pb is a link that leads out of the outputs directory: "
    ):
        refuse_leaving(_links(workdir), workdir)


@pytest.mark.parametrize(
    "name, shown", [("evil\nline", "evil\\nline"), ("bell\a", "bell\\x07"), (os.fsdecode(b"bad\xff"), "bad\\udcff")]
)
def test_a_link_name_is_shown_on_one_printable_line(workdir, name, shown):
    (workdir / "outputs" / "model" / name).symlink_to("/etc")
    with pytest.raises(ModelGateError) as refused:
        refuse_leaving(_links(workdir), workdir)
    assert str(refused.value).startswith(f"outputs/model/{shown} is a link") and str(refused.value).isprintable()


def test_a_link_above_the_model_is_refused(workdir):
    (workdir / "outputs" / "model").rmdir()
    (workdir / "outputs" / "model").symlink_to(workdir.parent / "secret")
    with pytest.raises(ModelGateError, match="^outputs/model is a link that leads out"):
        refuse_leaving(_links(workdir), workdir)
    (workdir / "outputs" / "model").unlink()
    (workdir / "outputs" / "sub").symlink_to(workdir.parent / "secret", target_is_directory=True)
    with pytest.raises(ModelGateError, match="^outputs/sub is a link that leads out"):
        refuse_leaving(_links(workdir, "outputs/sub/model"), workdir)


def test_links_deep_below_are_found_and_counted(workdir):
    deep = workdir / "outputs" / "model" / "variables" / "a" / "b"
    deep.mkdir(parents=True)
    (deep / "one").symlink_to("/etc/passwd")
    (deep / "two").symlink_to("/etc/hostname")
    with pytest.raises(ModelGateError, match=r"variables/a/b/one is a link .* \(and 1 more link\)"):
        refuse_leaving(_links(workdir), workdir)


def test_a_link_inside_outputs_is_refused_only_where_the_gate_reads(workdir):
    model = workdir / "outputs" / "model"
    (workdir / "outputs" / "real.pb").write_bytes(b"pb")
    (model / "saved_model.pb").symlink_to("../real.pb")
    links = _links(workdir)
    refuse_leaving(links, workdir)  # it stays inside
    with pytest.raises(
        ModelGateError, match="^outputs/model/saved_model.pb is a link: a registered version holds no links"
    ):
        refuse_read_through(links, model, locate(model), workdir)
    (model / "saved_model.pb").unlink()
    (model / "digits.keras").write_bytes(b"zip")
    (model / "README").symlink_to("../real.pb")  # beside the Keras file: registration skips it, the gate never reads it
    links = _links(workdir)
    refuse_read_through(links, model, locate(model), workdir)
    assert [link.path.name for link in links] == ["README"]


def test_the_model_path_itself_as_a_link_inside_is_refused(workdir):
    (workdir / "outputs" / "model").rename(workdir / "outputs" / "real")
    (workdir / "outputs" / "model").symlink_to("real")
    links = _links(workdir)
    refuse_leaving(links, workdir)
    with pytest.raises(ModelGateError, match="^outputs/model is a link: "):
        refuse_read_through(links, workdir / "outputs" / "model", None, workdir)


def test_a_link_loop_is_no_hang(workdir):
    model = workdir / "outputs" / "model"
    os.symlink("loop-b", model / "loop-a")
    os.symlink("loop-a", model / "loop-b")
    (model / "saved_model.pb").write_bytes(b"pb")
    links = _links(workdir)
    with pytest.raises(ModelGateError, match="loop-a is a link"):
        refuse_leaving(links, workdir) or refuse_read_through(links, model, locate(model), workdir)


# --- reading what Keras 2 wrote, without Keras ------------------------------------------------


def test_a_keras_2_15_config_loses_only_the_keys_it_added_to_each_object():
    from runner.serving.modelio import _as_keras2

    written = {
        "class_name": "Sequential",
        "keras_version": "2.15.0",
        "config": {
            "layers": [
                {
                    "module": "keras.layers",
                    "class_name": "Lambda",
                    "registered_name": None,
                    "config": {"module": "__main__", "units": 3},
                }
            ]
        },
    }
    assert _as_keras2(written) == {
        "class_name": "Sequential",
        "keras_version": "2.15.0",
        "config": {
            "layers": [
                {
                    "class_name": "Lambda",
                    "config": {"module": "__main__", "units": 3},
                }  # a layer's own "module" setting stays
            ]
        },
    }


@pytest.mark.parametrize("keras3", [True, False])
def test_export_passes_verbose_only_to_a_keras_that_takes_it(tmp_path, keras3):
    from runner.serving.modelio import _export_saved_model

    calls = []

    class Model:
        if keras3:

            def export(self, path, format="tf_saved_model", verbose=True):
                calls.append((path, verbose))

        else:

            def export(self, filepath):
                calls.append((filepath,))

    _export_saved_model(Model(), tmp_path / "saved")
    assert calls == [(str(tmp_path / "saved"), False)] if keras3 else [(str(tmp_path / "saved"),)]
