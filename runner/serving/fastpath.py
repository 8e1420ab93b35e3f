"""TensorFlow Serving's `:predict` and the Open Inference Protocol's JSON `infer` without KServe's
HTTP stack: an ASGI layer in front of KServe's app that parses the request itself (runner.serving.inputs:
the same checks for both) and answers from the model — at once, or (`:predict`) with --batch together
with the requests that arrived while the model was busy (their rows stacked, the outputs split back).
FastAPI's routing, request models and KServe's dataplane cost more CPU per request than a small
model does, and parse a body on the event loop; every other route (binary v2 tensors included)
stays KServe's. A large body is parsed, checked and predicted in a thread: health checks are answered meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from runner.serving import inputs, modelio
from runner.serving.modelio import InputError
from runner.serving.signature import Signature

MAX_BATCH = 64  # requests in one model call with --batch
OFF_LOOP_BYTES = 256 * 1024  # a body this large is handled in a thread (parsing it takes milliseconds)
BINARY_HEADER = b"inference-header-content-length"  # v2 binary tensors: KServe's to read


class Protocol(enum.Enum):
    V1 = "v1"  # TensorFlow Serving's :predict
    V2 = "v2"  # the Open Inference Protocol's infer, as JSON


@dataclass(frozen=True)
class PredictRequest:
    """A :predict request that fits its signature, waiting for the model's outputs."""

    signature: Signature
    values: dict[str, np.ndarray]
    rows: bool  # `instances` (answered as `predictions`), else `inputs` (answered as `outputs`)
    protocol: Protocol = Protocol.V1
    model_name: str = ""  # v2 answers name the model and echo the request's id
    request_id: str = ""

    def answer(self, outputs: dict[str, np.ndarray]) -> dict:
        if self.protocol is Protocol.V2:
            answers = [_v2_output(name, value) for name, value in sorted(outputs.items())]
            return {
                "model_name": self.model_name,
                "model_version": None,
                "id": self.request_id,
                "parameters": None,
                "outputs": answers,
            }
        if self.rows:
            return {"predictions": _rows(outputs)}
        columns = modelio.outputs_as_json(outputs)
        return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}

    def batch_key(self) -> tuple | None:
        """Requests with the same key can run as one batch (rows stacked); None: never batched."""
        if self.protocol is Protocol.V2 or any(
            value.ndim == 0 or value.dtype == object for value in self.values.values()
        ):
            return None
        return (
            self.signature.name,
            *((name, value.dtype.str, value.shape[1:]) for name, value in sorted(self.values.items())),
        )

    def size(self) -> int:
        return len(next(iter(self.values.values())))


def predict_batch(model, requests: list[PredictRequest]) -> list[dict[str, np.ndarray] | Exception]:
    """Outputs for each request, from one model call where they share a batch key (their rows
    stacked, the outputs split back); a batch whose outputs do not come back row for row, or that
    fails, is run request by request (each its own answer or error)."""
    results: list = [None] * len(requests)
    groups: dict = {}
    for index, request in enumerate(requests):
        key = request.batch_key()
        groups.setdefault(key if key is not None else ("single", index), []).append(index)
    for indices in groups.values():
        if len(indices) > 1:
            members = [requests[i] for i in indices]
            sizes = [member.size() for member in members]
            try:
                stacked = {name: np.concatenate([m.values[name] for m in members]) for name in members[0].values}
                outputs = model.predict(stacked, members[0].signature.name)
                if all(np.ndim(value) >= 1 and len(value) == sum(sizes) for value in outputs.values()):
                    bounds = np.cumsum([0, *sizes])
                    for index, start, end in zip(indices, bounds[:-1], bounds[1:]):
                        results[index] = {name: value[start:end] for name, value in outputs.items()}
                    continue
            except Exception:  # one bad member must not fail the others: each on its own below
                pass
        for index in indices:
            try:
                results[index] = model.predict(requests[index].values, requests[index].signature.name)
            except Exception as exc:
                results[index] = exc
    return results


def _v2_output(name: str, value: np.ndarray) -> dict:
    value = np.asarray(value)
    datatype = "BYTES" if value.dtype.kind in "OSU" else inputs.V2_DTYPES.get(value.dtype.name, "FP32")
    data = modelio.outputs_as_json({name: value.reshape(-1)})[name]
    return {
        "name": name,
        "shape": list(value.shape),
        "datatype": datatype,
        "parameters": None,
        "data": data,
    }  # as KServe answers


def _rows(outputs: dict[str, np.ndarray]) -> list:
    columns = modelio.outputs_as_json(outputs)
    if len(columns) == 1:
        return next(iter(columns.values()))
    batch = min(len(value) for value in columns.values() if isinstance(value, list))
    return [{name: value[row] for name, value in columns.items()} for row in range(batch)]


_PAUSES = [0]
_PAUSES_LOCK = threading.Lock()


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a large body is parsed: JSON makes millions of
    objects and no cycles, and each full collection over them held the interpreter (the event
    loop with it) for 100 ms and more. Back on when the last such parse ends."""
    with _PAUSES_LOCK:
        _PAUSES[0] += 1
        if _PAUSES[0] == 1:
            gc.disable()
    try:
        yield
    finally:
        with _PAUSES_LOCK:
            _PAUSES[0] -= 1
            if _PAUSES[0] == 0:
                gc.enable()


def _binary_json_size(scope) -> int | None:
    """Inference-Header-Content-Length, the JSON part of a binary v2 request: None when absent,
    -1 when it is not a number."""
    for key, value in scope.get("headers", ()):
        if key.lower() == BINARY_HEADER:
            return int(value) if value.strip().isdigit() else -1
    return None


class FastPredict:
    """ASGI in front of KServe's app: `:predict` and JSON `infer`, the routes clients call most, go
    straight to the endpoint; every other route is KServe's."""

    def __init__(self, app, endpoint, ready: Callable[[], bool], batch: bool = False) -> None:
        self.app, self.endpoint, self.ready, self.batch = app, endpoint, ready, batch
        self.paths = {
            f"/v1/models/{endpoint.name}:predict": Protocol.V1,
            f"/v2/models/{endpoint.name}/infer": Protocol.V2,
        }
        self.pending: list[tuple[PredictRequest, Any]] = []  # (request, future) waiting for the next batch
        try:
            import orjson

            self.dumps = orjson.dumps
        except ImportError:  # the serving environment has it (KServe needs it); a bare one may not
            self.dumps = lambda value: json.dumps(value).encode()

    def protocol(self, scope) -> Protocol | None:
        """The protocol this layer answers the request in; None: KServe's."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        protocol = self.paths.get(scope["path"])
        if protocol is Protocol.V2 and _binary_json_size(scope) is not None:
            return None
        return protocol

    async def __call__(self, scope, receive, send) -> None:
        protocol = self.protocol(scope)
        if protocol is None:
            size = _binary_json_size(scope) if scope["type"] == "http" else None
            if size is not None and not 0 <= size < OFF_LOOP_BYTES:  # KServe parses that JSON on the event loop
                await self._send(
                    send,
                    400,
                    self.dumps(
                        {
                            "error": (
                                "the JSON part of a binary request (Inference-Header-Content-Length) "
                                f"must be 0 to {OFF_LOOP_BYTES - 1} bytes"
                            )
                        }
                    ),
                )
                return
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        del chunks  # one copy of a large body, not two
        if len(body) >= OFF_LOOP_BYTES:
            status, payload = await asyncio.to_thread(self.answer_now, protocol, body)
        else:
            status, payload = await self.answer(body, protocol)
            payload = self.dumps(payload)
        await self._send(send, status, payload)

    @staticmethod
    async def _send(send, status: int, payload: bytes) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def answer(self, body: bytes, protocol: Protocol = Protocol.V1) -> tuple[int, dict]:
        """(status, answer) of a request parsed and predicted on the event loop (small bodies)."""
        if not self.ready():
            return self.not_ready()
        try:
            request = self.endpoint.request(protocol, body)
            return 200, request.answer(await self._outputs(request))
        except Exception as exc:
            return self.failed(exc)

    def answer_now(self, protocol: Protocol, body: bytes) -> tuple[int, bytes]:
        """(status, the answer's JSON) of a large request, in a thread: parsed, checked, predicted
        and written without the event loop."""
        if not self.ready():
            status, payload = self.not_ready()
        else:
            try:
                with _collector_paused():
                    request = self.endpoint.request(protocol, body)
                status, payload = (
                    200,
                    request.answer(self.endpoint.model.predict(request.values, request.signature.name)),
                )
            except Exception as exc:
                status, payload = self.failed(exc)
        return status, self.dumps(payload)

    def not_ready(self) -> tuple[int, dict]:
        return 503, {"error": f"Model with name {self.endpoint.name} is not ready."}

    @staticmethod
    def failed(exc: Exception) -> tuple[int, dict]:
        if isinstance(exc, InputError):  # the client's mistake: answered, not logged
            return 400, {"error": str(exc)}
        # the model's own failure: the log has the traceback, the client one line
        logging.getLogger("tftrain.serve").error("predict failed", exc_info=exc)
        return 500, {"error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}

    async def _outputs(self, request: PredictRequest) -> dict[str, np.ndarray]:
        """The model's outputs: at once, or (--batch) with the requests that came in meanwhile."""
        if not self.batch:
            return self.endpoint.model.predict(request.values, request.signature.name)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.pending.append((request, future))
        if len(self.pending) == 1:  # the first one waits one turn of the loop for the others
            loop.call_soon(self._run_pending)
        result = await future
        if isinstance(result, Exception):
            raise result
        return result

    def _run_pending(self) -> None:
        taken, self.pending = self.pending[:MAX_BATCH], self.pending[MAX_BATCH:]
        if self.pending:
            asyncio.get_running_loop().call_soon(self._run_pending)
        for (_, future), result in zip(taken, predict_batch(self.endpoint.model, [request for request, _ in taken])):
            if not future.done():
                future.set_result(result)
