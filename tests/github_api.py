"""A small HTTP server that speaks GitHub's REST protocol for the endpoints tftrain calls (no
GitHub-compatible server can run here): repositories, issue comments, releases and their assets,
self-hosted runners.
Status codes, JSON shapes and `url` fields follow api.github.com, so PyGithub talks to it with
base_url pointed here, as it would to GitHub Enterprise."""

from __future__ import annotations

import json
import re
import threading
import time
from fnmatch import fnmatchcase
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

from protocol_server import LocalServer

REPO = r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
ROUTES = [
    ("GET", re.compile(REPO + r"$"), "repo"),
    ("GET", re.compile(REPO + r"/issues/(?P<number>\d+)$"), "issue"),
    ("GET", re.compile(REPO + r"/issues/(?P<number>\d+)/comments$"), "list_comments"),
    ("POST", re.compile(REPO + r"/issues/(?P<number>\d+)/comments$"), "create_comment"),
    ("PATCH", re.compile(REPO + r"/issues/comments/(?P<id>\d+)$"), "edit_comment"),
    ("GET", re.compile(REPO + r"/releases$"), "list_releases"),
    ("POST", re.compile(REPO + r"/releases$"), "create_release"),
    ("GET", re.compile(REPO + r"/releases/tags/(?P<tag>[^/]+)$"), "release_by_tag"),
    ("GET", re.compile(REPO + r"/releases/(?P<id>\d+)$"), "get_release"),
    ("PATCH", re.compile(REPO + r"/releases/(?P<id>\d+)$"), "update_release"),
    ("POST", re.compile(REPO + r"/releases/(?P<id>\d+)/assets$"), "upload_asset"),
    ("GET", re.compile(REPO + r"/releases/(?P<id>\d+)/assets$"), "list_assets"),
    ("GET", re.compile(REPO + r"/releases/assets/(?P<id>\d+)$"), "get_asset"),
    ("GET", re.compile(REPO + r"/actions/runners$"), "list_runners"),
]
DEFAULT_LABELS = {"self-hosted", "linux", "windows", "macos", "x64", "arm", "arm64"}  # the runner sets these: read-only


class GitHubAPI(LocalServer):
    def __init__(self, token: str = "ghs_test", read_only: bool = False) -> None:
        self.token = token
        self.read_only = read_only
        self.comments: dict[int, dict] = {}
        self.releases: list[dict] = []
        self.assets: dict[int, tuple[dict, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail_uploads = 0  # answer this many uploads with 502, as GitHub sometimes does
        self.runners: dict[str, list[dict]] = {}
        self.runners_forbidden = False  # answer the runners list as GitHub does for the job's GITHUB_TOKEN
        self.failing: dict[tuple[str, str], int] = {}  # (method, path pattern) → the status it answers; see fail()
        self.next_id = 1000
        self.lock = threading.RLock()
        super().__init__(self._handler())

    def _id(self) -> int:
        with self.lock:
            return self._id_unlocked()

    def _id_unlocked(self) -> int:
        self.next_id += 1
        return self.next_id

    def add_release(
        self, owner: str, repo: str, tag: str, assets: dict[str, bytes], draft: bool = False, body: str = ""
    ) -> dict:
        """A release, as POST /releases makes it (tests also seed them directly)."""
        release_id = self._id()
        release = {
            "id": release_id,
            "tag_name": tag,
            "name": tag,
            "draft": draft,
            "prerelease": False,
            "url": f"{self.url}/repos/{owner}/{repo}/releases/{release_id}",
            "assets_url": f"{self.url}/repos/{owner}/{repo}/releases/{release_id}/assets",
            "upload_url": f"{self.url}/repos/{owner}/{repo}/releases/{release_id}/assets{{?name,label}}",
            "html_url": f"https://github.example/{owner}/{repo}/releases/tag/{tag}",
            "created_at": _now(),
            "published_at": None if draft else _now(),
            "body": body,
            "assets": [],
        }
        for name, data in assets.items():
            self._add_asset(release, owner, repo, name, data, "application/octet-stream")
        self.releases.insert(0, release)  # GitHub lists the newest first
        return release

    def fail(self, method: str, path: str, status: int) -> None:
        """Answer `method path` (a glob: /repos/o/r/releases/*) with `status` and GitHub's error body
        from now on; status 0 closes the connection without an answer, as a crashing server does."""
        self.failing[(method, path)] = status

    def failure(self, method: str, path: str) -> int | None:
        return next(
            (status for (verb, glob), status in self.failing.items() if verb == method and fnmatchcase(path, glob)),
            None,
        )

    def add_runner(
        self, owner: str, repo: str, name: str, labels: list[str], status: str = "online", busy: bool = False
    ) -> dict:
        runner = {
            "id": self._id(),
            "name": name,
            "os": "Linux",
            "status": status,
            "busy": busy,
            "ephemeral": False,
            "runner_group_id": 1,
            "labels": [
                {"id": self._id(), "name": label, "type": "read-only" if label.lower() in DEFAULT_LABELS else "custom"}
                for label in labels
            ],
        }
        self.runners.setdefault(f"{owner}/{repo}", []).append(runner)
        return runner

    def _add_asset(self, release: dict, owner: str, repo: str, name: str, data: bytes, content_type: str) -> dict:
        import hashlib

        with self.lock:
            asset_id = self._id_unlocked()
            asset = {
                "id": asset_id,
                "name": name,
                "size": len(data),
                "state": "uploaded",
                "url": f"{self.url}/repos/{owner}/{repo}/releases/assets/{asset_id}",
                "browser_download_url": f"{self.url}/download/{asset_id}/{name}",
                "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "content_type": content_type,
                "created_at": _now(),
                "updated_at": _now(),
            }
            self.assets[asset_id] = (asset, data)
            release["assets"].append(asset)
            return asset

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(
                self,
                code: int,
                body,
                content_type: str = "application/json; charset=utf-8",
                headers: dict | None = None,
            ) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, code: int, message: str) -> None:
                self._send(code, {"message": message, "documentation_url": "https://docs.github.com/rest"})

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                api.requests.append((method, url.path))
                if self.headers.get("Authorization") not in (f"token {api.token}", f"Bearer {api.token}"):
                    return self._error(401, "Bad credentials")
                status = api.failure(method, url.path)
                if status is not None:
                    return self._fail(status)
                for verb, pattern, name in ROUTES:
                    match = pattern.match(url.path)
                    if verb == method and match:
                        return getattr(self, name)(**match.groupdict())
                return self._error(404, "Not Found")

            def _fail(self, status: int) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if status == 0:
                    self.close_connection = True
                    return
                self._error(status, HTTPStatus(status).phrase)

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

            def _body(self) -> dict:
                return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

            def repo(self, owner, repo):
                self._send(
                    200,
                    {
                        "id": 1,
                        "name": repo,
                        "full_name": f"{owner}/{repo}",
                        "url": f"{api.url}/repos/{owner}/{repo}",
                        "owner": {"login": owner},
                        "private": False,
                        "default_branch": "main",
                    },
                )

            def issue(self, owner, repo, number):
                base = f"{api.url}/repos/{owner}/{repo}"
                self._send(
                    200,
                    {
                        "number": int(number),
                        "title": "PR",
                        "state": "open",
                        "url": f"{base}/issues/{number}",
                        "comments_url": f"{base}/issues/{number}/comments",
                        "pull_request": {"url": f"{base}/pulls/{number}"},
                    },
                )

            def list_comments(self, owner, repo, number):
                self._send(200, [c for c in api.comments.values() if c["issue"] == int(number)])

            def create_comment(self, owner, repo, number):
                if api.read_only:
                    return self._error(403, "Resource not accessible by integration")
                comment_id = api._id()
                comment = {
                    "id": comment_id,
                    "issue": int(number),
                    "body": self._body()["body"],
                    "user": {"login": "github-actions[bot]"},
                    "url": f"{api.url}/repos/{owner}/{repo}/issues/comments/{comment_id}",
                    "html_url": f"https://github.example/{owner}/{repo}/pull/{number}#issuecomment-{comment_id}",
                    "created_at": _now(),
                    "updated_at": _now(),
                }
                api.comments[comment_id] = comment
                self._send(201, comment)

            def edit_comment(self, owner, repo, id):
                comment = api.comments.get(int(id))
                if comment is None:
                    return self._error(404, "Not Found")
                comment.update(body=self._body()["body"], updated_at=_now())
                self._send(200, comment)

            def list_releases(self, owner, repo):
                self._send(200, api.releases)

            def _release(self, id):
                return next((r for r in api.releases if r["id"] == int(id)), None)

            def create_release(self, owner, repo):
                body = self._body()
                with api.lock:
                    if any(r["tag_name"] == body["tag_name"] for r in api.releases):
                        return self._send(
                            422,
                            {
                                "message": "Validation Failed",
                                "errors": [{"resource": "Release", "code": "already_exists", "field": "tag_name"}],
                                "documentation_url": "https://docs.github.com/rest/releases/releases#create-a-release",
                            },
                        )
                    release = api.add_release(
                        owner, repo, body["tag_name"], {}, draft=body.get("draft", False), body=body.get("body", "")
                    )
                    release.update(
                        name=body.get("name") or body["tag_name"], target_commitish=body.get("target_commitish", "main")
                    )
                self._send(201, release)

            def release_by_tag(self, owner, repo, tag):
                release = next((r for r in api.releases if r["tag_name"] == tag and not r["draft"]), None)
                self._send(200, release) if release else self._error(404, "Not Found")

            def get_release(self, owner, repo, id):
                release = self._release(id)
                self._send(200, release) if release else self._error(404, "Not Found")

            def update_release(self, owner, repo, id):
                release = self._release(id)
                if release is None:
                    return self._error(404, "Not Found")
                body = self._body()
                for key in ("name", "body", "draft", "prerelease", "tag_name"):
                    if key in body:
                        release[key] = body[key]
                if release["draft"] is False and release["published_at"] is None:
                    release["published_at"] = _now()
                self._send(200, release)

            def upload_asset(self, owner, repo, id):
                release = self._release(id)
                if release is None:
                    return self._error(404, "Not Found")
                if api.fail_uploads > 0:
                    api.fail_uploads -= 1
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    return self._error(502, "Bad Gateway")
                name = parse_qs(urlparse(self.path).query)["name"][0]
                if any(a["name"] == name for a in release["assets"]):
                    self.rfile.read(int(self.headers.get("Content-Length", 0)))
                    return self._send(
                        422,
                        {
                            "message": "Validation Failed",
                            "errors": [{"resource": "ReleaseAsset", "code": "already_exists", "field": "name"}],
                        },
                    )
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                asset = api._add_asset(
                    release, owner, repo, name, data, self.headers.get("Content-Type", "application/octet-stream")
                )
                self._send(201, asset)

            def list_assets(self, owner, repo, id):
                release = next((r for r in api.releases if r["id"] == int(id)), None)
                self._send(200, release["assets"]) if release else self._error(404, "Not Found")

            def get_asset(self, owner, repo, id):
                if int(id) not in api.assets:
                    return self._error(404, "Not Found")
                asset, data = api.assets[int(id)]
                if "application/octet-stream" in self.headers.get("Accept", ""):
                    return self._send(200, data, "application/octet-stream")
                self._send(200, asset)

            def list_runners(self, owner, repo):
                if api.runners_forbidden:
                    return self._send(
                        403,
                        {
                            "message": "Resource not accessible by integration",
                            "status": "403",
                            "documentation_url": "https://docs.github.com/rest/actions/self-hosted-runners",
                        },
                    )
                runners = api.runners.get(f"{owner}/{repo}", [])
                query = parse_qs(urlparse(self.path).query)
                per_page = min(int(query.get("per_page", ["30"])[0]), 100)
                page = max(int(query.get("page", ["1"])[0]), 1)
                last = max(1, -(-len(runners) // per_page))
                rels = {}
                if page > 1:
                    rels.update(prev=page - 1, first=1)
                if page < last:
                    rels.update(next=page + 1, last=last)
                base = f"{api.url}/repos/{owner}/{repo}/actions/runners?per_page={per_page}&page="
                link = ", ".join(f'<{base}{number}>; rel="{rel}"' for rel, number in rels.items())
                chunk = runners[(page - 1) * per_page : page * per_page]
                self._send(
                    200, {"total_count": len(runners), "runners": chunk}, headers={"Link": link} if link else None
                )

        return Handler


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
