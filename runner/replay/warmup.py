"""TensorFlow Serving's warmup file: `assets.extra/tf_serving_warmup_requests` in a SavedModel, a
TFRecord file of PredictionLog records (tensorflow-serving-api's protos) that TF Serving (and
KServe's TensorFlow runtime) sends to a model before it takes traffic — at most 1,000 of them.

Written from recorded requests (`tftrain replay export`, and by registration into the SavedModel
when model.replay is set) with the version's signature: each :predict or infer request that fits it
becomes a PredictRequest of TensorProtos of the signature's dtypes; /score requests and requests that
do not fit are left out, counted. Read back (a warmup file given as model.replay.requests) with
TensorFlow's own TFRecord reader: a file that is not one, a record that is not a predict request, or
more than 1,000 records is RequestsError naming the file and the record. TensorFlow and the protos
are imported only here (the `replay` extra; MissingExtra otherwise).
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.errors import MissingExtra
from runner.replay.records import MAX_FILE_BYTES, Request, RequestsError, Route

WARMUP_NAME = "tf_serving_warmup_requests"
WARMUP_DIR = "assets.extra"
MAX_WARMUP = 1000  # TF Serving reads no more


def _protos():
    """(tensorflow, prediction_log_pb2, predict_pb2), or MissingExtra naming what to install."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    except ImportError as exc:
        raise MissingExtra(f"TF Serving's warmup file needs tensorflow and tensorflow-serving-api ({exc.name} is missing): "
                           "pip install tensorflow-cpu and, beside it, pip install --no-deps tensorflow-serving-api") from None
    return tf, prediction_log_pb2, predict_pb2


def is_warmup(path: Path) -> bool:
    """A warmup file rather than JSON Lines: its name, or a TFRecord's first bytes — a record's length
    as a little-endian uint64, whose high bytes are NUL for any record under 4 GiB (no text has a NUL)."""
    if path.name == WARMUP_NAME:
        return True
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except OSError:
        return False
    return len(head) == 12 and head[4:8] == b"\x00\x00\x00\x00"


def read_warmup(path: Path) -> list[Request]:
    """The warmup file's predict requests, as :predict requests with `inputs` columns."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise RequestsError(f"{path}: {size} bytes: a warmup file holds at most {MAX_WARMUP} requests")
    tf, prediction_log_pb2, _ = _protos()
    requests: list[Request] = []
    number = 0
    try:
        for number, record in enumerate(tf.data.TFRecordDataset(str(path)).as_numpy_iterator(), 1):
            if number > MAX_WARMUP:
                raise RequestsError(f"{path}: more than {MAX_WARMUP} records: TF Serving reads no more")
            requests.append(_request(path, number, record, tf, prediction_log_pb2))
    except tf.errors.OpError as exc:
        raise RequestsError(f"{path}: record {number + 1}: not a TFRecord file ({exc.message.splitlines()[0]})") from None
    if not requests:
        raise RequestsError(f"{path}: no requests in it")
    return requests


def _request(path: Path, number: int, record: bytes, tf, prediction_log_pb2) -> Request:
    from google.protobuf.message import DecodeError

    log = prediction_log_pb2.PredictionLog()
    try:
        log.ParseFromString(record)
    except DecodeError:
        raise RequestsError(f"{path}: record {number}: not a PredictionLog") from None
    if log.WhichOneof("log_type") != "predict_log":
        raise RequestsError(f"{path}: record {number}: a {log.WhichOneof('log_type') or 'empty'} record, not a predict request")
    request = log.predict_log.request
    try:
        inputs = {name: tf.make_ndarray(tensor).tolist() for name, tensor in request.inputs.items()}
    except (TypeError, ValueError) as exc:
        raise RequestsError(f"{path}: record {number}: a tensor that cannot be read ({exc})") from None
    inputs = {name: value.decode("utf-8", "replace") if isinstance(value, bytes) else value for name, value in inputs.items()}
    body = {"inputs": inputs, **({"signature_name": request.model_spec.signature_name} if request.model_spec.signature_name else {})}
    return Request(f"warmup-{number}", body, Route.V1)


def write_warmup(requests: list[Request], out: Path, signature, model_name: str) -> tuple[int, int]:
    """The first MAX_WARMUP requests that fit `signature` (runner.serving.signature.Signature) as
    the warmup file `out` (a new file); (written, left out)."""
    from runner.serving import inputs
    from runner.serving.modelio import InputError

    tf, prediction_log_pb2, predict_pb2 = _protos()
    written = left_out = 0
    with tf.io.TFRecordWriter(str(out)) as writer:
        for request in requests:
            if written >= MAX_WARMUP:
                break
            try:
                if request.route is Route.SCORE:
                    raise InputError("a /score request")
                values = (inputs.v2_values if request.route is Route.V2 else inputs.v1_values)(request.body, signature)
            except InputError:
                left_out += 1
                continue
            predict = predict_pb2.PredictRequest()
            predict.model_spec.name = model_name
            predict.model_spec.signature_name = signature.name
            for name, value in values.items():
                predict.inputs[name].CopyFrom(tf.make_tensor_proto(value))
            writer.write(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=predict)).SerializeToString())
            written += 1
    return written, left_out
