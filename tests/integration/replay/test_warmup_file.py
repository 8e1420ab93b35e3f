"""TensorFlow Serving's warmup file with TensorFlow and tensorflow-serving-api's protos: what is written
is read back with TensorFlow's own reader (tf.data.TFRecordDataset) and PredictionLog.FromString and
its tensors equal the requests; hostile records are refused one line each; `tftrain replay export`
as a user runs it. No TensorFlow Serving model_server binary here: the file is checked against the
protos and reader TF Serving uses, not loaded by the server."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")  # the integration venv holds it (scripts/requirements.txt)
from conftest import TFTRAIN  # noqa: E402
from serving_models import BuiltModel, register_version  # noqa: E402
from tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_log_pb2  # noqa: E402

from runner.errors import NotFoundError, UsageError  # noqa: E402
from runner.replay.sources import load_requests  # noqa: E402
from runner.replay.warmup import put_into_saved_model, write_warmup  # noqa: E402
from runner.serving.inputs import v1_values  # noqa: E402
from runner.serving.records import WARMUP_FILE, Request, RequestsError, Route  # noqa: E402
from runner.serving.signature import Signature, TensorSpec  # noqa: E402

SIGNATURE = Signature(
    "serving_default",
    (
        TensorSpec("features", "float32", (None, 3)),
        TensorSpec("ids", "int64", (None,)),
        TensorSpec("words", "string", (None,)),
    ),
    (TensorSpec("out", "float32", (None, 1)),),
)
REQUESTS = [
    Request(
        "rows",
        {
            "instances": [
                {"features": [1, 2, 3], "ids": 7, "words": "hello"},
                {"features": [4, 5, 6.5], "ids": 8, "words": "wörld"},
            ]
        },
        Route.V1,
    ),
    Request("columns", {"inputs": {"features": [[0.25, 0, -1]], "ids": [2**40], "words": ["x"]}}),
    Request(
        "v2",
        {
            "inputs": [
                {"name": "features", "datatype": "FP32", "shape": [1, 3], "data": [9, 8, 7]},
                {"name": "ids", "datatype": "INT64", "shape": [1], "data": [-3]},
                {"name": "words", "datatype": "BYTES", "shape": [1], "data": ["v2"]},
            ]
        },
        Route.V2,
    ),
    Request("unfit", {"instances": [[1, 2]]}, Route.V1),
    Request("script", {"data": [1]}, Route.SCORE),
]


class Lines:
    def __init__(self):
        self.lines = []

    def info(self, text):
        self.lines.append(text)


def parsed(path: Path) -> list:
    """The file as TF Serving reads it: TFRecords through TensorFlow, each a PredictionLog."""
    return [
        prediction_log_pb2.PredictionLog.FromString(raw)
        for raw in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()
    ]


def test_written_records_are_prediction_logs_whose_tensors_equal_the_requests(tmp_path):
    logger = Lines()
    assert write_warmup(REQUESTS, tmp_path / WARMUP_FILE, SIGNATURE, "digits", logger) == 3
    logs = parsed(tmp_path / WARMUP_FILE)
    assert len(logs) == 3 and all(log.WhichOneof("log_type") == "predict_log" for log in logs)
    for log, request in zip(logs, REQUESTS):
        sent = log.predict_log.request
        assert (sent.model_spec.name, sent.model_spec.signature_name) == ("digits", "serving_default")
        expected = v1_values(request.body, SIGNATURE) if request.route is not Route.V2 else None
        tensors = {name: tf.make_ndarray(sent.inputs[name]) for name in sent.inputs}
        assert {name: tf.as_dtype(sent.inputs[name].dtype).name for name in sent.inputs} == {
            "features": "float32",
            "ids": "int64",
            "words": "string",
        }
        if expected is not None:
            np.testing.assert_array_equal(tensors["features"], expected["features"])
            np.testing.assert_array_equal(tensors["ids"], expected["ids"])
            assert [w.decode() for w in tensors["words"]] == list(expected["words"])
    np.testing.assert_array_equal(tf.make_ndarray(logs[2].predict_log.request.inputs["features"]), [[9, 8, 7]])
    assert tf.make_ndarray(logs[1].predict_log.request.inputs["ids"]).tolist() == [2**40]
    assert logger.lines == [
        f"{tmp_path / WARMUP_FILE}: 3 requests written; left out: 1 do not fit the signature (first: unfit: signature"
        " 'serving_default' has inputs features, ids, words: each row must be a {name: value} mapping); 1 are /score"
        " requests (no tensors to warm up with)"
    ]
    with pytest.raises(FileExistsError):
        write_warmup(REQUESTS, tmp_path / WARMUP_FILE, SIGNATURE, "digits")


def test_a_full_disk_under_tensorflows_writer_is_an_oserror_and_leaves_no_file(tmp_path):
    """TensorFlow's file system raises its own error (words only, no errno): it is the OSError a caller
    turns into one line (ENOSPC: `tftrain: error: disk full writing FILE`, exit 22)."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], check=True, timeout=30)
    try:
        (mount / "fill").write_bytes(b"\0" * 12 * 1024)
        many = [Request(f"r-{i}", {"instances": [{"features": [1.0] * 3, "ids": i, "words": "w"}]}) for i in range(500)]
        with pytest.raises(OSError) as caught:
            write_warmup(many, mount / WARMUP_FILE, SIGNATURE, "digits")
        assert caught.value.errno == errno.ENOSPC
        assert not (mount / WARMUP_FILE).exists()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)


def test_a_warmup_file_reads_back_as_v1_column_requests_with_the_same_values(tmp_path):
    write_warmup(REQUESTS, tmp_path / WARMUP_FILE, SIGNATURE, "digits")
    back = load_requests(tmp_path / WARMUP_FILE)
    assert [(r.id, r.route) for r in back] == [("warmup-1", Route.V1), ("warmup-2", Route.V1), ("warmup-3", Route.V1)]
    assert back[0].body == {
        "inputs": {"features": [[1, 2, 3], [4, 5, 6.5]], "ids": [7, 8], "words": ["hello", "wörld"]}
    }
    for request in back:
        json.loads(request.encoded())  # JSON as the replay sends it
        v1_values(request.body, SIGNATURE)  # and the server takes it


def write_records(path: Path, *records: bytes) -> Path:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def predict_log(**inputs) -> bytes:
    request = predict_pb2.PredictRequest()
    for name, proto in inputs.items():
        request.inputs[name].CopyFrom(proto)
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    ).SerializeToString()


def huge_tensor():
    proto = tf.make_tensor_proto([1.0], dtype=tf.float32)
    proto.tensor_shape.dim[0].size = 10**12  # one float_val, repeated by make_ndarray to a shape this size
    return proto


def negative_tensor():
    proto = tf.make_tensor_proto([1.0], dtype=tf.float32)
    proto.tensor_shape.dim[0].size = -1
    return proto


def too_many_values():
    proto = tf.make_tensor_proto([1.0, 2.0, 3.0], dtype=tf.float32)
    proto.tensor_shape.dim[0].size = 2  # (fewer values than the shape is TensorFlow's own: the last one repeated)
    return proto


def test_hostile_records_are_refused_one_line_naming_the_file_and_record(tmp_path):
    good = predict_log(x=tf.make_tensor_proto([[1.0, 2.0]], dtype=tf.float32))
    classify = prediction_log_pb2.PredictionLog(
        classify_log=prediction_log_pb2.ClassifyLog(request=classification_pb2.ClassificationRequest())
    )
    cases = {
        "not-a-log": (b"\xff\xff\xff", "record 2: not a PredictionLog"),
        "no-log": (b"", r"record 2: not a PredictionLog \(it holds no log\)"),
        "classify": (classify.SerializeToString(), "record 2: a classify_log, not a predict_log"),
        "no-inputs": (predict_log(), "record 2: a PredictRequest with no inputs"),
        "huge": (predict_log(x=huge_tensor()), "record 2: more than 1048576 values"),
        "negative": (predict_log(x=negative_tensor()), r"record 2: input 'x': shape \[-1\] is not a tensor's"),
        "nan": (
            predict_log(x=tf.make_tensor_proto([float("nan")], dtype=tf.float32)),
            "record 2: input 'x': holds NaN",
        ),
        "binary": (
            predict_log(x=tf.make_tensor_proto([b"\xff\xd8jpeg"], dtype=tf.string)),
            "record 2: input 'x': a string that is not UTF-8",
        ),
        "complex": (
            predict_log(x=tf.make_tensor_proto([1j], dtype=tf.complex64)),
            "record 2: input 'x': dtype complex64",
        ),
        "mismatch": (predict_log(x=too_many_values()), "record 2: input 'x': not a float32 tensor TensorFlow can read"),
    }
    for name, (record, message) in cases.items():
        path = write_records(tmp_path / name, good, record)
        with pytest.raises(RequestsError, match=message) as caught:
            load_requests(path)
            pytest.fail(f"{name}: read")
        assert str(caught.value).startswith(f"{path}: record 2") and "\n" not in str(caught.value), name


def test_small_records_standing_for_many_values_are_refused_before_they_are_expanded(tmp_path):
    many = tf.make_tensor_proto([1.0], dtype=tf.float32)
    many.tensor_shape.dim[0].size = 1 << 20  # one value given, a million meant: 20 bytes in the file
    path = write_records(tmp_path / "amplified", *[predict_log(x=many)] * 9)
    assert path.stat().st_size < 1000
    with pytest.raises(RequestsError, match=f"{path}: record 9: more than {1 << 23} values in the file up to here"):
        load_requests(path)


def test_a_record_whose_data_checksum_is_wrong_is_refused_by_tensorflows_reader(tmp_path):
    path = write_records(tmp_path / "damaged", predict_log(x=tf.make_tensor_proto([[1.0, 2.0]], dtype=tf.float32)))
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # inside the data: the framing still holds, the data's CRC does not
    path.write_bytes(bytes(data))
    with pytest.raises(RequestsError, match=r"record 1: TensorFlow cannot read it \(.*corrupted record"):
        load_requests(path)


def test_into_a_saved_model_the_file_replaces_only_a_regular_file_and_no_link_is_followed(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"stand-in")
    requests = REQUESTS[:1]
    assert put_into_saved_model(model, requests, SIGNATURE, "digits") == 1
    target = model / "assets.extra" / WARMUP_FILE
    assert len(parsed(target)) == 1
    assert put_into_saved_model(model, REQUESTS, SIGNATURE, "digits") == 3  # replaced
    assert len(parsed(target)) == 3 and os.listdir(model / "assets.extra") == [WARMUP_FILE]

    outside = tmp_path / "outside"
    outside.write_text("keep me")
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(UsageError, match="not a regular file"):
        put_into_saved_model(model, requests, SIGNATURE, "digits")
    assert outside.read_text() == "keep me" and target.is_symlink()

    other = tmp_path / "other"
    other.mkdir()
    (other / "saved_model.pb").write_bytes(b"stand-in")
    linked_dir = tmp_path / "other-dir"
    linked_dir.mkdir()
    (other / "assets.extra").symlink_to(linked_dir)
    with pytest.raises(UsageError, match="links are never followed"):
        put_into_saved_model(other, requests, SIGNATURE, "digits")
    assert not list(linked_dir.iterdir())

    (tmp_path / "model-link").symlink_to(model)
    with pytest.raises(UsageError, match="never through a link"):
        put_into_saved_model(tmp_path / "model-link", requests, SIGNATURE, "digits")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotFoundError, match="no saved_model.pb"):
        put_into_saved_model(empty, requests, SIGNATURE, "digits")
    assert not (empty / "assets.extra").exists()


@pytest.fixture
def registered(tmp_path):
    """A version registered with the gate's serving.json (features: float32 (None, 64)); its model is a stand-in."""
    root = tmp_path / "built"
    (root / "saved_model").mkdir(parents=True)
    (root / "saved_model" / "saved_model.pb").write_bytes(b"stand-in")
    np.savez(root / "sample.npz", features=np.zeros((1, 64), np.float32))
    np.savez(root / "predictions.npz", output_0=np.zeros((1, 10), np.float32))
    home = tmp_path / "home"
    register_version(home, BuiltModel(root, tf.__version__))
    return home


def export(home: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "TFTRAIN_HOME": str(home), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [TFTRAIN, "replay", "export", *args], capture_output=True, text=True, timeout=300, env=environment
    )


def test_export_writes_the_recorded_requests_in_the_versions_signature(tmp_path, registered):
    recording = tmp_path / "recording"
    recording.mkdir()
    rows = [json.dumps({"id": f"r{i}", "route": "v1", "body": {"instances": [[float(i)] * 64]}}) for i in range(5)]
    rows.append(json.dumps({"id": "short", "route": "v1", "body": {"instances": [[1.0] * 63]}}))
    (recording / "requests-000001.jsonl").write_text("\n".join(rows) + "\n")
    out = tmp_path / WARMUP_FILE
    done = export(registered, str(recording), "--warmup", str(out), "--model", "digits@v1")
    assert done.returncode == 0, done.stderr
    assert "5 requests written; left out: 1 do not fit the signature (first: short:" in done.stdout + done.stderr
    logs = parsed(out)
    assert [log.predict_log.request.model_spec.name for log in logs] == ["digits"] * 5
    np.testing.assert_array_equal(
        tf.make_ndarray(logs[3].predict_log.request.inputs["features"]), np.full((1, 64), 3.0, np.float32)
    )

    again = export(registered, str(recording), "--warmup", str(out), "--model", "digits@v1")
    assert again.returncode == UsageError.exit_code and "already there" in again.stderr and len(parsed(out)) == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    refused = export(registered, str(bad), "--warmup", str(tmp_path / "w2"), "--model", "digits@v1")
    assert refused.returncode == UsageError.exit_code and f"{bad}:1: not JSON" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "w2").exists()
    unknown = export(registered, str(recording), "--warmup", str(tmp_path / "w3"), "--model", "nope@v1")
    assert unknown.returncode == NotFoundError.exit_code and not (tmp_path / "w3").exists()


def test_export_without_tensorflow_serving_api_names_the_package(tmp_path, registered):
    shadow = tmp_path / "shadow" / "tensorflow_serving"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    path = os.pathsep.join([str(shadow.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    (tmp_path / "r.jsonl").write_text('{"body": {"instances": [[1]]}}\n')
    done = export(
        registered,
        str(tmp_path / "r.jsonl"),
        "--warmup",
        str(tmp_path / "w"),
        "--model",
        "digits@v1",
        env={"PYTHONPATH": path},
    )
    assert done.returncode == 24
    assert done.stderr.strip().splitlines() == [
        "tftrain: error: the warmup file needs tensorflow-serving-api: pip install --no-deps"
        f" 'tensorflow-serving-api=={'.'.join(tf.__version__.split('.')[:2])}.*' (it asks for the full tensorflow"
        " package; it needs only the TensorFlow already here; in the action: extras: replay)"
    ]
    assert sys.executable  # the shadow stands for the package's absence; TensorFlow itself is there
