"""How tftrain words a failed call to an outside service (GitHub, S3, a registry, Kubernetes): one
line naming the service, the call and the status, e.g. `GitHub: GET /repos/o/r/issues/7 answered
404 Not Found`. Each service's module turns its client's exceptions into its own error with these;
URLs are shown without their query string (a presigned URL's signature is a credential)."""

from __future__ import annotations

import re
from http import HTTPStatus
from urllib.parse import urlsplit

ERRNO = re.compile(r"\[Errno -?\d+\] ")
QUERY = re.compile(r"\?[^\s'\")]*")  # a URL's query string: it may carry a signature
WRAPPER = re.compile(r"^\w+\(host=[^)]*\): ")  # urllib3's "HTTPConnectionPool(host=…, port=…): "


def answered(service: str, call: str, status: int | None, detail: str | None = None, reason: str | None = None) -> str:
    """`SERVICE: CALL answered STATUS REASON[: detail]`: the reason is the status's phrase unless the
    service names it (S3's error codes); the detail only when it says more."""
    phrase = reason or _phrase(status)
    text = f"{service}: {call} answered {status or '?'}" + (f" {phrase}" if phrase else "")
    detail = one_line(detail or "")
    if detail and detail.casefold() not in (phrase.casefold(), str(status)):
        text += f": {detail}"
    return text


def unreachable(service: str, call: str, exc: BaseException) -> str:
    """`SERVICE: CALL got no answer: Connection refused`, for a connection that failed or broke."""
    return f"{service}: {call} got no answer: {cause(exc)}"


def cause(exc: BaseException) -> str:
    """The innermost cause of a connection error, without the wrappers' repetition of the URL:
    `Connection refused`, `Remote end closed connection without response`, `Read timed out.`"""
    innermost, todo, seen = None, [exc], {id(exc)}
    while todo and innermost is None:  # breadth first through what each wraps, to the first that wraps nothing
        current = todo.pop(0)
        inner = [e for e in (getattr(current, "reason", None), current.__cause__, current.__context__, *current.args)
                 if isinstance(e, BaseException)]
        if not inner:
            innermost = current
        todo += [e for e in inner if id(e) not in seen]
        seen.update(id(e) for e in inner)
    innermost = innermost or exc
    text = one_line(str(innermost)) or type(innermost).__name__
    return QUERY.sub("", WRAPPER.sub("", ERRNO.split(text)[-1]))


def path_of(url: str) -> str:
    return urlsplit(url).path or "/"


def one_line(text: str) -> str:
    return " ".join(text.split())


def _phrase(status: int | None) -> str:
    try:
        return HTTPStatus(status).phrase if status else ""
    except ValueError:
        return ""
