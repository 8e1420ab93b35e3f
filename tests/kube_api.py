"""A small HTTP server that speaks the Kubernetes REST protocol for what tftrain calls: Kubeflow
jobs (create, get, delete), pods (list by label, logs) and Secrets. No cluster can run here; this
plays the API server and a training-operator that runs each replica as a pod with a scripted log.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

from protocol_server import LocalServer

JOBS = re.compile(r"^/apis/kubeflow\.org/v1/namespaces/(?P<ns>[^/]+)/(?P<plural>tfjobs|mpijobs)(?:/(?P<name>[^/]+))?$")
PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<name>[^/]+)/log)?$")
SECRETS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets(?:/(?P<name>[^/]+))?$")


class KubeAPI(LocalServer):
    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}
        self.secrets: dict[str, dict] = {}
        self.deleted: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.logs: dict[tuple[str, int], str] = {}  # (replica type, index) → log text
        self.result = ("Succeeded", "TFJob succeeded")
        self.running_polls = 2  # status reads that still say Running
        self.polls = 0
        self.failing: dict[tuple[str, str], int] = {}  # (method, path pattern) → the status it answers; see fail()
        super().__init__(self._handler())

    def fail(self, method: str, path: str, status: int) -> None:
        """Answer `method path` (a glob) with `status` and a Kubernetes Status body from now on;
        status 0 closes the connection without an answer, as a crashing API server does."""
        self.failing[(method, path)] = status

    def kubeconfig(self) -> str:
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": self.url}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )

    def pods(self) -> list[dict]:
        pods = []
        for name, job in self.jobs.items():
            specs = job["spec"].get("tfReplicaSpecs") or job["spec"].get("mpiReplicaSpecs")
            for kind, spec in specs.items():
                container = spec["template"]["spec"]["containers"][0]["name"]
                for index in range(spec.get("replicas", 1)):
                    labels = {
                        "training.kubeflow.org/job-name": name,
                        "training.kubeflow.org/replica-type": kind.lower(),
                        "training.kubeflow.org/replica-index": str(index),
                    }
                    pods.append(
                        {
                            "metadata": {
                                "name": f"{name}-{kind.lower()}-{index}",
                                "namespace": job["metadata"]["namespace"],
                                "labels": labels,
                            },
                            "spec": {
                                "containers": [
                                    {"name": container, "image": spec["template"]["spec"]["containers"][0]["image"]}
                                ]
                            },
                            "status": {"phase": "Running" if self.polls < self.running_polls else "Succeeded"},
                        }
                    )
        return pods

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

            def _injected(self, method: str, path: str) -> bool:
                """Answer with the failure fail() set for this request, if any."""
                status = next(
                    (s for (m, glob), s in api.failing.items() if m == method and fnmatchcase(path, glob)), None
                )
                if status is None:
                    return False
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if status == 0:
                    self.close_connection = True
                else:
                    self._status(
                        status, HTTPStatus(status).phrase.replace(" ", ""), f"injected failure of {method} {path}"
                    )
                return True

            def _status(self, code: int, reason: str, message: str) -> None:
                self._send(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": message,
                        "reason": reason,
                        "code": code,
                    },
                )

            def do_POST(self):
                path = urlparse(self.path).path
                api.requests.append(("POST", path))
                if self._injected("POST", path):
                    return
                if self.headers.get("Authorization") != "Bearer test-token":
                    return self._status(401, "Unauthorized", "Unauthorized")
                if match := JOBS.match(path):
                    job = self._body()
                    name = job["metadata"]["name"]
                    if name in api.jobs:
                        return self._status(409, "AlreadyExists", f'{match["plural"]} "{name}" already exists')
                    job["metadata"]["uid"] = f"uid-{len(api.jobs)}"
                    api.jobs[name] = job
                    return self._send(201, job)
                if match := SECRETS.match(path):
                    secret = self._body()
                    name = secret["metadata"]["name"]
                    if name in api.secrets:
                        return self._status(409, "AlreadyExists", f'secrets "{name}" already exists')
                    api.secrets[name] = secret
                    return self._send(201, secret)
                return self._status(404, "NotFound", path)

            def do_PUT(self):
                path = urlparse(self.path).path
                api.requests.append(("PUT", path))
                if self._injected("PUT", path):
                    return
                if (match := SECRETS.match(path)) and match["name"]:
                    api.secrets[match["name"]] = self._body()
                    return self._send(200, api.secrets[match["name"]])
                return self._status(404, "NotFound", path)

            def do_GET(self):
                url = urlparse(self.path)
                api.requests.append(("GET", url.path))
                if self._injected("GET", url.path):
                    return
                if (match := JOBS.match(url.path)) and match["name"]:
                    job = api.jobs.get(match["name"])
                    if job is None:
                        return self._status(404, "NotFound", f'{match["plural"]} "{match["name"]}" not found')
                    api.polls += 1
                    conditions = [{"type": "Running", "status": "True"}]
                    if api.polls > api.running_polls:
                        kind, message = api.result
                        conditions.append({"type": kind, "status": "True", "message": message})
                    return self._send(200, {**job, "status": {"conditions": conditions}})
                if match := PODS.match(url.path):
                    if match["name"]:
                        pod = next((p for p in api.pods() if p["metadata"]["name"] == match["name"]), None)
                        if pod is None:
                            return self._status(404, "NotFound", match["name"])
                        labels = pod["metadata"]["labels"]
                        key = (
                            labels["training.kubeflow.org/replica-type"],
                            int(labels["training.kubeflow.org/replica-index"]),
                        )
                        return self._send(200, api.logs.get(key, ""), "text/plain")
                    selector = parse_qs(url.query).get("labelSelector", [""])[0]
                    wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
                    items = [
                        p for p in api.pods() if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())
                    ]
                    return self._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
                return self._status(404, "NotFound", url.path)

            def do_DELETE(self):
                path = urlparse(self.path).path
                api.requests.append(("DELETE", path))
                if self._injected("DELETE", path):
                    return
                if (match := JOBS.match(path)) and match["name"] in api.jobs:
                    api.deleted.append(match["name"])
                    del api.jobs[match["name"]]
                    return self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return self._status(404, "NotFound", path)

        return Handler
