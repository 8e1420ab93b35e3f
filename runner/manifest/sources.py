"""An input's `source`: one (a local path, an https:// file, an s3:// prefix), or a list of
https:// files that become one directory, each file named after the last part of its URL's path
(as written, percent signs and all). Azure ML's `Dataset.File.from_files(path=[url, …])`."""

from __future__ import annotations

import posixpath
import urllib.parse

MAX_SOURCES = 1000


def url_file_name(url: str) -> str:
    """The name a downloaded file gets: the last part of the URL's path ('' when there is none)."""
    return posixpath.basename(urllib.parse.urlsplit(url).path)


def check_sources(value: object) -> object:
    """A list of sources: https:// (or http://) files only, at most MAX_SOURCES, whose file names
    differ, so that the input's directory holds each one (refused here, before any download)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(url, str) for url in value):
        raise ValueError("must be a path or URL, or a list of https:// URLs")
    if not value:
        raise ValueError("a list of sources needs at least one https:// URL")
    if len(value) > MAX_SOURCES:
        raise ValueError(f"{len(value)} sources: at most {MAX_SOURCES} in one input")
    seen: dict[str, int] = {}
    for index, url in enumerate(value):
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError as exc:
            raise ValueError(f"[{index}]: not a URL: {exc}") from None
        if parts.scheme.lower() not in ("https", "http") or not parts.hostname:
            raise ValueError(
                f"[{index}]: {url!r}: a list holds https:// files; an s3:// prefix or a local path is a source of"
                " its own"
            )
        name = url_file_name(url)
        if name in ("", ".", "..") or any(ord(char) < 32 for char in name):
            raise ValueError(f"[{index}]: {url!r}: its path names no file to download")
        if len(name.encode()) > 255:
            raise ValueError(f"[{index}]: its file name is longer than 255 bytes, more than a file system takes")
        if name in seen:
            raise ValueError(
                f"[{index}]: {url!r}: file name {name!r} is also that of [{seen[name]}]; one directory holds both"
            )
        seen[name] = index
    return value
