"""How a failed call to an outside service is worded: one line, the call, the status, no secrets."""

from __future__ import annotations

import http.client

import pytest
import urllib3

from runner import errors


@pytest.mark.parametrize(
    ("args", "kwargs", "line"),
    [
        (
            ("GitHub", "GET /repos/o/r/issues/7", 404, "Not Found"),
            {},
            "GitHub: GET /repos/o/r/issues/7 answered 404 Not Found",
        ),
        (
            ("GitHub", "POST /x", 403, "Resource not accessible\nby integration"),
            {},
            "GitHub: POST /x answered 403 Forbidden: Resource not accessible by integration",
        ),
        (
            ("S3", "PutObject s3://b/k", 500),
            {"reason": "InternalError"},
            "S3: PutObject s3://b/k answered 500 InternalError",
        ),
        (("Kubernetes", "reading TFJob ns/x", 599, "odd"), {}, "Kubernetes: reading TFJob ns/x answered 599: odd"),
    ],
)
def test_answered(args, kwargs, line):
    assert errors.answered(*args, **kwargs) == line


def wrapped(inner: BaseException) -> urllib3.exceptions.MaxRetryError:
    """As urllib3 raises it when its retries run out, with the URL (and its query) in the text."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise urllib3.exceptions.MaxRetryError(None, "/asset?X-Amz-Signature=secret", exc) from exc
    except urllib3.exceptions.MaxRetryError as exc:
        return exc


@pytest.mark.parametrize(
    ("inner", "cause"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "Connection refused"),
        (
            urllib3.exceptions.ProtocolError(
                "Connection aborted.", http.client.RemoteDisconnected("Remote end closed connection without response")
            ),
            "Remote end closed connection without response",
        ),
        (urllib3.exceptions.ResponseError("too many 500 error responses"), "too many 500 error responses"),
    ],
)
def test_the_cause_of_a_broken_connection(inner, cause):
    line = errors.unreachable("GitHub", "GET /asset", wrapped(inner))
    assert line == f"GitHub: GET /asset got no answer: {cause}"
    assert "secret" not in line


def test_a_query_string_never_shows():
    assert (
        errors.cause(ValueError("Max retries exceeded with url: /a?sig=secret (Caused by X)"))
        == "Max retries exceeded with url: /a (Caused by X)"
    )
    assert (
        errors.path_of("https://uploads.example/repos/o/r/releases/1/assets?name=m.tar.gz&sig=x")
        == "/repos/o/r/releases/1/assets"
    )
