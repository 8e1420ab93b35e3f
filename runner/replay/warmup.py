"""TensorFlow Serving's warmup file: a SavedModel's assets.extra/tf_serving_warmup_requests, TFRecords
of tensorflow_serving.apis.prediction_log_pb2.PredictionLog (predict_log.request: a PredictRequest,
model_spec and the inputs as TensorProtos), at most MAX_RECORDS of them (TF Serving reads no more).

`write_warmup` turns requests (runner.serving.records) into one: those sent to :predict (V1: rows or
columns, read by runner.serving.inputs.v1_values) or infer (V2: v2_values), checked against the
signature serving.json records, in its dtypes. A request that does not fit is left out and counted;
/score requests carry no tensors and are left out. `read_warmup` is the inverse, for a warmup file
given where requests are: each record a V1 request with "inputs" columns.

A warmup file is hostile input (committed, or taken from someone's SavedModel): its TFRecord framing
is walked here first (every length within the file, at most MAX_RECORDS records, MAX_FILE_BYTES in
all), so TensorFlow's reader never allocates more than the file holds; each tensor's shape is
checked before it becomes an array (one float_val with a shape of 10**12 values would repeat it).
TensorFlow (~3.5 s to import) and tensorflow-serving-api are imported only here, only when used.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np

from runner.history.regular import open_regular
from runner.serving.inputs import V2_DTYPES, v1_values, v2_values
from runner.serving.modelio import InputError
from runner.serving.records import (
    MAX_FILE_BYTES,
    TFRECORD_HEADER,
    WARMUP_FILE,
    Request,
    RequestsError,
    Route,
    masked_crc32c,
)
from runner.serving.signature import Signature

MAX_RECORDS = 1000  # TensorFlow Serving's cap (servables/tensorflow/saved_model_warmup_util.cc)
MAX_VALUES = 1 << 20  # values in one record's tensors: a request line holds ~800,000 numbers at most
# values in the whole file: a TensorProto may give one value for a shape of many (repeated by
# make_ndarray), so 1,000 tiny records could stand for 10**9 numbers (~30 GB as JSON lists)
MAX_TOTAL_VALUES = 1 << 23  # 8 M: 1,000 requests of a batch of 8 rows × 1,000 features
ASSETS_EXTRA = "assets.extra"
PACKAGE = "tensorflow-serving-api"


@dataclass(frozen=True)
class Selection:
    """What of the requests a warmup file can hold: (id, inputs) in order, and what was left out."""

    chosen: tuple[tuple[str, dict[str, np.ndarray]], ...]
    unfit: int = 0  # do not fit the signature
    scoring: int = 0  # /score requests: a script's raw data, no tensors
    over: int = 0  # fit, but past MAX_RECORDS
    first_unfit: str = ""  # "ID: why", the first unfit one

    def summary(self, where: Path) -> str:
        """One line: how many written to `where`, how many left out and why."""
        left = [
            f"{count} {why}"
            for count, why in (
                (
                    self.unfit,
                    "do not fit the signature" + (f" (first: {self.first_unfit})" if self.first_unfit else ""),
                ),
                (self.scoring, "are /score requests (no tensors to warm up with)"),
                (self.over, f"are past TensorFlow Serving's {MAX_RECORDS} records"),
            )
            if count
        ]
        return f"{where}: {len(self.chosen)} requests written" + (f"; left out: {'; '.join(left)}" if left else "")


def select(requests: Iterable[Request], signature: Signature) -> Selection:
    """The requests as the signature's tensors (V1 and V2 bodies, checked as the server checks
    them), the first MAX_RECORDS that fit. A route of None is the SavedModel's own: :predict."""
    chosen: list[tuple[str, dict[str, np.ndarray]]] = []
    unfit = scoring = over = 0
    first_unfit = ""
    for request in requests:
        if request.route is Route.SCORE:
            scoring += 1
            continue
        try:
            values = (v2_values if request.route is Route.V2 else v1_values)(request.body, signature)
        except InputError as exc:
            unfit += 1
            first_unfit = first_unfit or f"{request.id}: {str(exc)[:200]}"
            continue
        if len(chosen) >= MAX_RECORDS:
            over += 1
        else:
            chosen.append((request.id, values))
    return Selection(tuple(chosen), unfit, scoring, over, first_unfit)


def check_expressible(signature: Signature) -> None:
    """RequestsError unless every input has a dtype a JSON request can carry (a TensorProto of it)."""
    for spec in signature.inputs:
        if spec.dtype not in V2_DTYPES:
            raise RequestsError(
                f"signature {signature.name!r}: input {spec.name!r} is {spec.dtype}: no JSON request carries it"
            )


def write_warmup(requests: Iterable[Request], out: Path, signature: Signature, model_name: str, logger=None) -> int:
    """The requests that fit `signature` as a warmup file at `out` (a new file: an existing one is
    FileExistsError, one that cannot be written OSError, nothing left), written with TensorFlow's
    TFRecordWriter; how many records. The summary line (written, left out and why) goes to
    `logger.info`. RequestsError when none fits: nothing written."""
    check_expressible(signature)
    selection = select(requests, signature)
    if not selection.chosen:
        raise RequestsError(
            f"{out}: no request fits signature {signature.name!r}:"
            f" {selection.summary(out).partition('; ')[2] or 'no requests'}"
        )
    tf, protos = tensorflow_modules()
    records = [_record(tf, protos, values, signature, model_name) for _, values in selection.chosen]
    os.close(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))  # ours, new
    try:
        with tf.io.TFRecordWriter(str(out)) as writer:
            for record in records:
                writer.write(record)
    except BaseException as exc:
        out.unlink(missing_ok=True)
        if isinstance(exc, tf.errors.OpError):  # TensorFlow's file system says why in words only
            full = "No space left on device" in exc.message
            raise OSError(errno.ENOSPC if full else errno.EIO, exc.message, str(out)) from None
        raise
    if logger is not None:
        logger.info(selection.summary(out))
    return len(records)


def _record(tf, protos, values: dict[str, np.ndarray], signature: Signature, model_name: str) -> bytes:
    predict_pb2, prediction_log_pb2 = protos
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature.name
    dtypes = {spec.name: spec.dtype for spec in signature.inputs}
    for name, array in values.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array, dtype=tf.as_dtype(dtypes[name])))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    ).SerializeToString()


def read_warmup(path: Path) -> list[Request]:
    """The PredictRequests of the warmup file at `path`, each a V1 request ("inputs" columns) with the
    id warmup-N. RequestsError naming the file and record for anything else."""
    try:
        handle = open_regular(path) if not path.is_symlink() else None
    except OSError as exc:
        raise RequestsError(f"{path}: {exc.strerror or exc}") from None
    if handle is None:
        raise RequestsError(f"{path}: a link: give the file itself")
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise RequestsError(
                f"{path}: {size} bytes: a warmup file read as requests holds at most {MAX_FILE_BYTES >> 20} MiB"
            )
        count = frames(handle, size, path)
    if not count:
        raise RequestsError(f"{path}: no requests in it (an empty warmup file)")
    tf, protos = tensorflow_modules()
    requests, total = [], 0
    iterator = iter(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())
    for number in range(1, count + 1):
        where = f"{path}: record {number}"
        try:
            raw = next(iterator)
        except StopIteration:
            raise RequestsError(f"{where}: missing (the file changed while it was read)") from None
        except tf.errors.OpError as exc:
            raise RequestsError(
                f"{where}: TensorFlow cannot read it ({(exc.message or type(exc).__name__).splitlines()[0][:200]})"
            ) from None
        inputs, values = _inputs(tf, protos, raw, where, MAX_TOTAL_VALUES - total)
        total += values
        requests.append(Request(f"warmup-{number}", {"inputs": inputs}, Route.V1))
    return requests


def frames(handle: BinaryIO, size: int, where: Path) -> int:
    """How many TFRecords `handle` holds, each header checked and each length within the file;
    RequestsError naming the record otherwise, or past MAX_RECORDS."""
    at = number = 0
    while at < size:
        number += 1
        if number > MAX_RECORDS:
            raise RequestsError(
                f"{where}: record {number}: more than {MAX_RECORDS} records (TensorFlow Serving reads at most"
                f" {MAX_RECORDS})"
            )
        head = handle.read(TFRECORD_HEADER)
        if len(head) < TFRECORD_HEADER:
            raise RequestsError(f"{where}: record {number}: truncated (the file ends inside its header)")
        if masked_crc32c(head[:8]) != int.from_bytes(head[8:], "little"):
            hint = ": a warmup file is TFRecords of PredictionLog" if number == 1 else ""
            raise RequestsError(
                f"{where}: record {number}: not a TFRecord (its length's checksum does not match){hint}"
            )
        length = int.from_bytes(head[:8], "little")
        if length > size - at - TFRECORD_HEADER - 4:
            raise RequestsError(f"{where}: record {number}: truncated (it says {length} bytes, the file ends before)")
        handle.seek(length + 4, os.SEEK_CUR)
        at += TFRECORD_HEADER + length + 4
    return number


def _inputs(tf, protos, raw: bytes, where: str, budget: int) -> tuple[dict[str, Any], int]:
    """A PredictionLog's request inputs as JSON columns, and how many values they hold (counted
    before any is made: more than MAX_VALUES or `budget` is refused); RequestsError for anything else."""
    from google.protobuf.message import DecodeError

    _, prediction_log_pb2 = protos
    try:
        log = prediction_log_pb2.PredictionLog.FromString(raw)
    except (DecodeError, RecursionError, ValueError):
        raise RequestsError(f"{where}: not a PredictionLog") from None
    kind = log.WhichOneof("log_type")
    if kind != "predict_log":
        raise RequestsError(
            f"{where}: "
            + (
                f"a {kind}, not a predict_log: only PredictRequests are replayed"
                if kind
                else "not a PredictionLog (it holds no log)"
            )
        )
    tensors = log.predict_log.request.inputs
    if not tensors:
        raise RequestsError(f"{where}: a PredictRequest with no inputs")
    total = 0
    for name in tensors:
        total += _values(tensors[name], f"{where}: input {name[:80]!r}")
        if total > MAX_VALUES:
            raise RequestsError(
                f"{where}: more than {MAX_VALUES} values in its inputs: a warmup request is far smaller"
            )
    if total > budget:
        raise RequestsError(f"{where}: more than {MAX_TOTAL_VALUES} values in the file up to here: replay a sample")
    return {name: _json(tf, tensors[name], f"{where}: input {name[:80]!r}") for name in sorted(tensors)}, total


def _values(tensor, where: str) -> int:
    """How many values the TensorProto's shape holds (checked before any array is made)."""
    if tensor.tensor_shape.unknown_rank:
        raise RequestsError(f"{where}: a tensor of unknown rank")
    sizes = [dim.size for dim in tensor.tensor_shape.dim]
    if any(size < 0 for size in sizes) or len(sizes) > 32:
        raise RequestsError(f"{where}: shape {sizes[:33]} is not a tensor's (sizes ≥ 0, at most 32 dimensions)")
    return math.prod(sizes)


def _json(tf, tensor, where: str) -> Any:
    try:
        dtype = tf.as_dtype(tensor.dtype).name
    except (TypeError, ValueError):
        dtype = f"DT_{tensor.dtype}"
    if dtype not in V2_DTYPES:
        raise RequestsError(f"{where}: dtype {dtype}: no JSON request carries it")
    try:
        array = tf.make_ndarray(tensor)
    except (ValueError, TypeError, IndexError) as exc:
        raise RequestsError(f"{where}: not a {dtype} tensor TensorFlow can read ({str(exc)[:120]})") from None
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise RequestsError(f"{where}: holds NaN or an infinity: JSON has no such number")
    if dtype == "string":
        try:
            return (
                np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(array).tolist()
                if array.size
                else array.tolist()
            )
        except UnicodeDecodeError:
            raise RequestsError(
                f"{where}: a string that is not UTF-8 text (binary inputs have no JSON form here)"
            ) from None
    return array.tolist()


def put_into_saved_model(
    saved_model_dir: Path, requests: Iterable[Request], signature: Signature, model_name: str, logger=None
) -> int:
    """`requests` as SAVED_MODEL/assets.extra/tf_serving_warmup_requests; how many records. No link is
    followed, neither to the SavedModel nor inside it; a file already there is replaced only if it
    is a regular file (atomically: a reader sees the old file or the new one)."""
    from runner.errors import NotFoundError, UsageError

    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        model_fd = os.open(saved_model_dir, flags)
    except OSError as exc:
        raise UsageError(
            f"{saved_model_dir}: not a directory of its own ({exc.strerror}): a SavedModel is written into in place,"
            " never through a link"
        ) from None
    try:
        try:
            model_file = os.stat("saved_model.pb", dir_fd=model_fd, follow_symlinks=False)
        except FileNotFoundError:
            model_file = None
        if model_file is None or not stat.S_ISREG(model_file.st_mode):
            raise NotFoundError(f"{saved_model_dir}: no saved_model.pb in it: not a SavedModel")
        try:
            os.mkdir(ASSETS_EXTRA, 0o755, dir_fd=model_fd)
        except FileExistsError:
            pass
        try:
            extra_fd = os.open(ASSETS_EXTRA, flags, dir_fd=model_fd)
        except OSError as exc:
            raise UsageError(
                f"{saved_model_dir / ASSETS_EXTRA}: not a directory ({exc.strerror}): links are never followed"
            ) from None
        try:
            return _replace_in(extra_fd, saved_model_dir / ASSETS_EXTRA, requests, signature, model_name, logger)
        finally:
            os.close(extra_fd)
    finally:
        os.close(model_fd)


def _replace_in(directory_fd: int, directory: Path, requests, signature: Signature, model_name: str, logger) -> int:
    from runner.errors import UsageError

    try:
        existing = os.stat(WARMUP_FILE, dir_fd=directory_fd, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        raise UsageError(f"{directory / WARMUP_FILE}: not a regular file (a link, a directory, …): left as it is")
    with tempfile.TemporaryDirectory(prefix="tftrain-warmup-") as scratch:
        written = Path(scratch) / WARMUP_FILE
        count = write_warmup(requests, written, signature, model_name, logger)
        partial = f".{WARMUP_FILE}.{os.getpid()}.partial"
        out_fd = os.open(
            partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=directory_fd
        )
        try:
            with os.fdopen(out_fd, "wb") as out, open(written, "rb") as source:
                while chunk := source.read(1 << 20):
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, WARMUP_FILE, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
        except BaseException:
            try:
                os.unlink(partial, dir_fd=directory_fd)
            except FileNotFoundError:
                pass
            raise
    return count


def tensorflow_modules():
    """(tensorflow, (predict_pb2, prediction_log_pb2)), or MissingExtra naming what to install."""
    from runner.errors import MissingExtra

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported: its C++ chatter is no result
    try:
        import tensorflow as tf
    except ImportError:
        raise MissingExtra(
            f"the warmup file needs TensorFlow and {PACKAGE}: pip install 'tf-train-action[replay]', then pip install"
            f" --no-deps '{PACKAGE}==X.Y.*' of TensorFlow's X.Y (in the action: extras: replay)"
        ) from None
    release = ".".join(tf.__version__.split(".")[:2])
    try:
        from tensorflow_serving.apis import predict_pb2, prediction_log_pb2
    except ImportError:
        raise MissingExtra(
            f"the warmup file needs {PACKAGE}: pip install --no-deps '{PACKAGE}=={release}.*' (it asks for the full"
            " tensorflow package; it needs only the TensorFlow already here; in the action: extras: replay)"
        ) from None
    return tf, (predict_pb2, prediction_log_pb2)
