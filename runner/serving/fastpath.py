"""TensorFlow Serving's `:predict` without KServe's HTTP stack: an ASGI layer in front of KServe's
app that parses the request itself and answers from the model — at once, or with --batch together
with the requests that arrived while the model was busy (their rows stacked, the outputs split back).
FastAPI's routing, request models and KServe's dataplane cost more CPU per request than a small
model does; every other route stays KServe's."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from runner.serving import modelio
from runner.serving.modelio import InputError
from runner.serving.signature import Signature

MAX_BATCH = 64  # requests in one model call with --batch


@dataclass(frozen=True)
class PredictRequest:
    """A :predict request that fits its signature, waiting for the model's outputs."""

    signature: Signature
    values: dict[str, np.ndarray]
    rows: bool  # `instances` (answered as `predictions`), else `inputs` (answered as `outputs`)

    def answer(self, outputs: dict[str, np.ndarray]) -> dict:
        if self.rows:
            return {"predictions": _rows(outputs)}
        columns = modelio.outputs_as_json(outputs)
        return {"outputs": next(iter(columns.values())) if len(columns) == 1 else columns}

    def batch_key(self) -> tuple | None:
        """Requests with the same key can run as one batch (rows stacked); None: never batched."""
        if any(value.ndim == 0 or value.dtype == object for value in self.values.values()):
            return None
        return (self.signature.name, *((name, value.dtype.str, value.shape[1:]) for name, value in sorted(self.values.items())))

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


def _rows(outputs: dict[str, np.ndarray]) -> list:
    columns = modelio.outputs_as_json(outputs)
    if len(columns) == 1:
        return next(iter(columns.values()))
    batch = min(len(value) for value in columns.values() if isinstance(value, list))
    return [{name: value[row] for name, value in columns.items()} for row in range(batch)]


class FastPredict:
    """ASGI in front of KServe's app: TensorFlow Serving's `:predict`, the route clients call most,
    goes straight to the endpoint — FastAPI's routing, request models and KServe's dataplane cost
    more CPU per request than the model does on a small machine; every other route is KServe's."""

    def __init__(self, app, endpoint, ready: Callable[[], bool], batch: bool = False) -> None:
        self.app, self.endpoint, self.ready, self.batch = app, endpoint, ready, batch
        self.path = f"/v1/models/{endpoint.name}:predict"
        self.pending: list[tuple[PredictRequest, Any]] = []  # (request, future) waiting for the next batch
        try:
            import orjson

            self.loads, self.dumps = orjson.loads, orjson.dumps
        except ImportError:  # the serving environment has it (KServe needs it); a bare one may not
            self.loads, self.dumps = json.loads, lambda value: json.dumps(value).encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        status, answer = await self.answer(b"".join(chunks))
        body = self.dumps(answer)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def answer(self, body: bytes) -> tuple[int, dict]:
        if not self.ready():
            return 503, {"error": f"Model with name {self.endpoint.name} is not ready."}
        try:
            try:
                request = self.endpoint.v1_request(self.loads(body))
            except ValueError as exc:
                if isinstance(exc, InputError):
                    raise
                raise InputError("the body is not JSON: send a JSON object with Content-Type: application/json") from None
            outputs = await self._outputs(request)
            return 200, request.answer(outputs)
        except InputError as exc:  # the client's mistake: answered, not logged
            return 400, {"error": str(exc)}
        except Exception as exc:  # the model's own failure: the log has the traceback, the client one line
            logging.getLogger("tftrain.serve").exception("predict failed")
            return 500, {"error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}


    async def _outputs(self, request: PredictRequest) -> dict[str, np.ndarray]:
        """The model's outputs: at once, or (--batch) with the requests that came in meanwhile."""
        if not self.batch:
            return self.endpoint.model.predict(request.values, request.signature.name)
        import asyncio

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
            import asyncio

            asyncio.get_running_loop().call_soon(self._run_pending)
        for (_, future), result in zip(taken, predict_batch(self.endpoint.model, [request for request, _ in taken])):
            if not future.done():
                future.set_result(result)
