"""The model server: one registered version behind KServe, inside the serving environment.

    python -m runner.serving.server --model-dir VERSION_DIR --name NAME [--runtime tensorflow|onnx]
                                    [--host 127.0.0.1] [--port 8080] [--max-body-bytes N] [--openapi]

It binds the port (0: a free one; the line `tftrain-serve: port N on HOST` says which), loads the
model, predicts on the version's sample (serving/sample.npz, else an input made up from the
signature) and compares with serving/predictions.npz where the gate left one; only then does it
accept connections. Routes (runner.serving.guard): TensorFlow Serving's REST API (predict, status,
metadata), the Open Inference Protocol (v2) and health — no model-repository or other management
route; a bearer token from TFTRAIN_SERVING_TOKEN (never argv) on all but health; bodies over
--max-body-bytes are 413. A request that does not fit the signature is a 400 naming the input
(runner.serving.inputs). SIGTERM stops accepting, finishes the requests in flight and exits 0.

`Endpoint` holds everything about requests and answers and needs no KServe (unit-tested with a
stand-in model); `main` is the KServe glue.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from runner.serving import guard, inputs, supervision
from runner.serving.fastpath import FastPredict, PredictRequest, Protocol
from runner.serving.layout import Runtime, VersionDir
from runner.serving.loading import check_sample, load_model
from runner.serving.metadata import tensor_info, v2_shape, validation_message
from runner.serving.modelio import InputError, LoadError
from runner.serving.recording import Recorder, RecordingLayer, recorder_of, recording_arguments
from runner.serving.signature import Signature

LOAD_FAILED = 3  # the model did not load or failed its sample check: the port never opened
BAD_SETTING = 2  # an argument or TFTRAIN_SERVING_TOKEN the server cannot start with
V2_DTYPES = inputs.V2_DTYPES


class Endpoint:
    """Requests in, answers out, for one loaded model (anything with .signatures,
    .default_signature() and .predict(inputs, signature_name))."""

    def __init__(self, model, name: str, version: int | None) -> None:
        self.model = model
        self.name = name
        self.version = str(version or 1)

    def signature(self, name: Any = None) -> Signature:
        if name in (None, ""):
            return self.model.default_signature()
        if not isinstance(name, str) or name not in self.model.signatures:
            raise InputError(
                f"signature_name {name!r} is not in the model (its signatures:"
                f" {', '.join(sorted(self.model.signatures))})"
            )
        return self.model.signatures[name]

    def v1_predict(self, body: Any) -> dict:
        """TensorFlow Serving's :predict: `instances` (rows) answer `predictions`, `inputs`
        (columns) answer `outputs`; one output is the value itself, several a mapping."""
        request = self.v1_request(body)
        return request.answer(self.model.predict(request.values, request.signature.name))

    def request(self, protocol: Protocol, body: bytes) -> PredictRequest:
        """A request's body (JSON) read and checked against the signature, in either protocol."""
        return self.v1_request(body) if protocol is Protocol.V1 else self.v2_request(body)

    def v1_request(self, body: Any) -> PredictRequest:
        body = _json_body(body)
        if not isinstance(body, dict):
            raise InputError('the body must be a JSON object with "instances" or "inputs"')
        signature = self.signature(body.get("signature_name"))
        return PredictRequest(signature, inputs.v1_values(body, signature), "instances" in body)

    def v2_request(self, body: Any) -> PredictRequest:
        """The Open Inference Protocol's JSON tensors, on the default signature."""
        body = _json_body(body)
        signature = self.signature()
        values = inputs.v2_values(body, signature)
        request_id = body.get("id") if isinstance(body.get("id"), str) else ""
        return PredictRequest(signature, values, False, Protocol.V2, self.name, request_id)

    def v2_infer(self, tensors: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        """The Open Inference Protocol's tensors as KServe read a binary request (name, datatype,
        shape, and data: an array for a binary tensor, JSON for the others) on the default
        signature, held to the same checks as a JSON request."""
        signature = self.signature()
        return self.model.predict(inputs.v2_values({"inputs": tensors}, signature), signature.name)

    def status(self, ready: bool) -> dict:
        state = "AVAILABLE" if ready else "UNAVAILABLE"
        return {
            "model_version_status": [
                {"version": self.version, "state": state, "status": {"error_code": "OK", "error_message": ""}}
            ]
        }

    def metadata(self) -> dict:
        """GET /v1/models/NAME/metadata: the signature_defs as TensorFlow Serving writes them."""
        defs = {
            name: {
                "inputs": {spec.name: tensor_info(spec) for spec in signature.inputs},
                "outputs": {spec.name: tensor_info(spec) for spec in signature.outputs},
                "method_name": "tensorflow/serving/predict",
            }
            for name, signature in sorted(self.model.signatures.items())
        }
        return {
            "model_spec": {"name": self.name, "signature_name": "", "version": self.version},
            "metadata": {"signature_def": {"signature_def": defs}},
        }

    def v2_types(self, outputs: bool) -> list[dict]:
        signature = self.signature()
        specs = signature.outputs if outputs else signature.inputs
        return [
            {
                "name": spec.name,
                "datatype": V2_DTYPES.get(spec.dtype, spec.dtype.upper()),
                "shape": v2_shape(spec.shape),
            }
            for spec in specs
        ]


def _json_body(body: Any) -> Any:
    """The body's JSON, read strictly (runner.serving.inputs), whatever its Content-Type (curl -d
    sends form-encoding); a body parsed already is taken as it is."""
    return inputs.loads(body) if isinstance(body, (bytes, bytearray, str)) else body


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m runner.serving.server", description="Serve one model version with KServe."
    )
    parser.add_argument(
        "--model-dir", type=Path, required=True, help="the version's directory: model/, serving/, model.onnx"
    )
    parser.add_argument("--name", required=True, help="the model's name in the URLs")
    parser.add_argument("--version", type=int, default=None, help="the version number the status reports")
    parser.add_argument("--runtime", choices=[r.value for r in Runtime], default=Runtime.TENSORFLOW.value)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--grace-period", type=int, default=30, help="seconds SIGTERM waits for requests in flight")
    parser.add_argument(
        "--batch", action="store_true", help=":predict requests that arrive while the model is busy run as one batch"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=guard.DEFAULT_MAX_BODY_BYTES,
        help="larger request bodies are answered 413",
    )
    parser.add_argument(
        "--openapi", action="store_true", help="serve /openapi.json and /docs (behind the token, if any)"
    )
    parser.add_argument(
        "--lifeline-fd", type=int, default=None, help="a pipe from `tftrain serve`: its end-of-file stops the server"
    )
    recording_arguments(parser)
    return parser.parse_args(argv)


def listen(host: str, port: int):
    """The listening socket, bound now (port 0: a free one); its port is printed for `tftrain serve`."""
    try:
        return supervision.listen(host, port)
    except ValueError as exc:
        raise LoadError(str(exc)) from None


def serve(
    endpoint: Endpoint, listener, args: argparse.Namespace, token: bytes | None, recorder: Recorder | None = None
) -> int:
    """KServe with `endpoint` as its one model, on `listener`, behind the guard, until SIGTERM or SIGINT."""
    import warnings

    import kserve.model_server as model_server
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
    from kserve.errors import InvalidInput
    from kserve.protocol.rest import server as rest_server

    warnings.filterwarnings("ignore", message=".*ORJSONResponse is deprecated.*")
    _nodelay_on_every_connection()

    class ServedModel(Model):
        def __init__(self) -> None:
            super().__init__(endpoint.name)
            self.ready = True  # loaded and checked before this object exists

        def predict(self, payload, headers=None):
            try:
                if not isinstance(payload, InferRequest):  # :predict and JSON infer are FastPredict's
                    raise InputError(
                        "send the Open Inference Protocol's tensors (JSON or binary) or TensorFlow Serving's :predict"
                    )
                return self._infer(payload)
            except InputError as exc:
                raise InvalidInput(str(exc)) from None

        def _infer(self, request):
            tensors = []
            for item in request.inputs:
                tensor = {"name": item.name, "datatype": item.datatype, "shape": list(item.shape)}
                try:  # a binary tensor's bytes as an array; JSON values as they came, never coerced
                    tensor["data"] = item.as_numpy() if item._raw_data is not None else item.data
                except Exception as exc:  # bytes that do not fill the shape, an unknown datatype
                    raise InputError(
                        f"input {item.name!r}: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
                    ) from None
                tensors.append(tensor)
            answers = []
            for name, value in sorted(endpoint.v2_infer(tensors).items()):
                value = np.asarray(value)
                datatype = "BYTES" if value.dtype.kind in "OSU" else V2_DTYPES.get(value.dtype.name, "FP32")
                output = InferOutput(name=name, shape=list(value.shape), datatype=datatype)
                output.set_data_from_numpy(value, binary_data=False)
                answers.append(output)
            return InferResponse(response_id=request.id or "", model_name=self.name, infer_outputs=answers)

        def get_input_types(self):
            return endpoint.v2_types(outputs=False)

        def get_output_types(self):
            return endpoint.v2_types(outputs=True)

    served = ServedModel()

    def unknown(model_name: str) -> JSONResponse:
        return JSONResponse({"error": f"Model with name {model_name} does not exist."}, status_code=404)

    # added before start(): matched before KServe's own routes of the same paths
    async def v1_status(model_name: str):
        if model_name != endpoint.name:
            return unknown(model_name)
        return JSONResponse(endpoint.status(served.ready), status_code=200 if served.ready else 503)

    async def v1_metadata(model_name: str):
        return endpoint.metadata() if model_name == endpoint.name else unknown(model_name)

    async def v2_ready():  # KServe's answers true whatever the model's state
        return JSONResponse({"ready": served.ready}, status_code=200 if served.ready else 503)

    async def bad_request(request, exc: RequestValidationError):
        return JSONResponse(
            {"error": validation_message(list(exc.errors()), getattr(exc, "body", None))}, status_code=400
        )

    async def client_error(request, exc: InvalidInput):  # the client's mistake, answered, not logged
        return JSONResponse({"error": str(exc)}, status_code=400)

    model_server.app.add_api_route("/v1/models/{model_name}", v1_status, methods=["GET"])
    model_server.app.add_api_route("/v1/models/{model_name}/metadata", v1_metadata, methods=["GET"])
    model_server.app.add_api_route("/v2/health/ready", v2_ready, methods=["GET"])
    model_server.app.add_exception_handler(RequestValidationError, bad_request)
    model_server.app.add_middleware(FastPredict, endpoint=endpoint, ready=lambda: served.ready, batch=args.batch)
    if recorder is not None:  # between the guard and the answers: what it lets through, answered
        model_server.app.add_middleware(RecordingLayer, recorder=recorder, name=endpoint.name)
    if args.openapi:
        from fastapi.openapi.docs import get_swagger_ui_html

        model_server.app.add_api_route(
            "/docs",
            lambda: get_swagger_ui_html(openapi_url="/openapi.json", title=endpoint.name),
            methods=["GET"],
            include_in_schema=False,
        )
    # added last: outside every other layer, it sees each request first
    model_server.app.add_middleware(
        guard.Guard, table=guard.routes(endpoint.name, args.openapi), token=token, max_body=args.max_body_bytes
    )

    class RESTServer(rest_server.RESTServer):
        def _add_middlewares(self, app) -> None:
            pass  # TimingMiddleware: two trace lines and CPU accounting on every request

        def _add_exception_handlers(self, app) -> None:
            super()._add_exception_handlers(app)
            app.add_exception_handler(InvalidInput, client_error)  # KServe logs a traceback for each

        async def start(self) -> None:
            self.create_application()
            await self._server.serve(sockets=[listener])  # bound already: its port was announced

    model_server.RESTServer = RESTServer
    server = ModelServer(
        http_port=listener.getsockname()[1],
        grpc_port=0,
        workers=1,
        max_threads=1,
        max_asyncio_workers=None,
        registered_models=None,
        enable_grpc=False,
        enable_docs_url=False,
        enable_latency_logging=False,
        access_log_format=None,
        grace_period=args.grace_period,
        predictor_config=None,
    )
    for quiet in ("uvicorn.access", "kserve.trace"):  # a line per request costs more than the request
        logging.getLogger(quiet).setLevel(logging.WARNING)
    dropped = supervision.DroppedAtShutdown()  # requests cancelled at shutdown: one line, not a traceback each
    logging.getLogger("uvicorn.error").addFilter(dropped)
    server.start([served])
    if dropped.said():
        print(dropped.said(), flush=True)
    return 0


def _nodelay_on_every_connection() -> None:
    """asyncio sets TCP_NODELAY only on sockets whose proto is TCP, and uvicorn's listening socket
    has proto 0: without it Nagle and delayed ACKs add ~40 ms to a keep-alive request."""
    import asyncio.base_events
    import socket

    def set_nodelay(sock) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    asyncio.base_events._set_nodelay = set_nodelay


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.argv[1:] = []  # `import kserve` parses sys.argv for its ModelServer defaults: give it none of ours
    supervision.supervised(args.lifeline_fd, args.grace_period)
    try:
        token = guard.server_token(os.environ, args.max_body_bytes)
    except ValueError as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return BAD_SETTING
    directory = VersionDir(args.model_dir)
    try:
        listener = listen(args.host, args.port)
        model = load_model(directory, Runtime(args.runtime))
        endpoint = Endpoint(model, args.name, args.version)
        checked = check_sample(model, directory, endpoint.signature())
    except (LoadError, InputError) as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return LOAD_FAILED
    print(f"tftrain-serve: {args.name}: {checked}", flush=True)
    print(
        "tftrain-serve:"
        f" {'every route but health needs the bearer token' if token else 'no token: every route is open'}; bodies up"
        f" to {args.max_body_bytes} bytes",
        flush=True,
    )
    try:
        recorder = recorder_of(args)
    except ValueError as exc:
        print(f"tftrain-serve: error: {exc}", file=sys.stderr, flush=True)
        return BAD_SETTING
    try:
        return serve(endpoint, listener, args, token, recorder)
    finally:
        if recorder is not None:
            recorder.close()


if __name__ == "__main__":
    sys.exit(main())
