"""Secret values, hidden as *** in everything tftrain prints or stores.

One Masker per tftrain process (the logger's), fed with the run's secret values before anything
prints them: the console, the rank logs, the metrics (names, tags, images, the script's verdict),
the run's message and records all pass through it. A value is matched whole, each of its lines
on its own (a script may print a multi-line secret line by line), and in its JSON-escaped forms
(for text serialised before it got here, such as the script's own metrics file), and
percent-encoded (as it stands quoted in a URL).

Credentials need no registering: in any text, whatever its scheme, a URL's password
(`scheme://user:PASSWORD@host`) and the value of a query parameter named like a credential
(`?password=…`, `&api_key=…`: see CREDENTIAL_WORDS) are masked too. A sweep storage URL, an
`--image` given with its login, or a URL a script prints never shows them, and no caller has to
remember to mask: the patterns live here, where every sink passes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import AnyStr
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_LINE = 4  # shorter lines of a multi-line secret are too common to hide ("}", "--")
BLOCK = 1 << 20
# A query parameter holds a credential when its name (any case) holds one of these words, or is
# `sig` (a signed URL's): password, passwd, sslpassword, pwd, token, access_token, secret,
# client_secret, key, api_key, apikey, auth, authorization, credential(s), signature.
CREDENTIAL_WORDS = ("pass", "pwd", "token", "secret", "key", "auth", "credential", "signature")
# The longest URL whose credentials are looked for across a cut in a stream (safe_end).
URL_SPAN = 4096
SPACES = (b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c")  # what ends a word (bytes.isspace)
# Each pattern starts at a literal and every repeat is bounded: a hostile line costs linear time.
# A URL's password: after `://user:`, up to its last `@` (a password may hold `@`); atomic groups,
# as their classes leave out what follows them, so that a failed match never backtracks.
USERINFO = re.compile(r"(://(?>[^\s/?#@:'\"]{0,256}):)(?:(?>[^\s'\"@]{0,256})@)+")
# A query parameter; its value runs to the end of the word or of the parameter (&), or to a quote
# (an error message's repr of the URL).
PARAMETER = re.compile(r"[?&]([A-Za-z0-9_.~-]{1,128})=")
VALUE = re.compile(r"[^\s&'\"<>]+")


class Masker:
    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values: tuple[str, ...] = ()
        self._text: tuple[str, ...] = ()  # what to look for, longest first
        self._bytes: tuple[bytes, ...] = ()
        self.longest = 0  # bytes in the longest of them
        self.add(values)

    def add(self, values: Iterable[str]) -> list[str]:
        """Hide `values` from now on; returns those that were new."""
        new = [value for value in dict.fromkeys(values) if value and value not in self.values]
        if new:
            needles = _needles(self.values + tuple(new))
            encoded = tuple(dict.fromkeys(as_bytes(needle) for needle in needles))
            # readers on other threads take one tuple or the other, never half of each
            self._bytes, self._text, self.longest = encoded, needles, max(map(len, encoded))
            self.values += tuple(new)
        return new

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        if not text:
            return text
        return mask_credentials(_mask(text, self._text, MASK) if self._text else text)

    def chunk(self, data: bytes) -> bytes:
        if not data:
            return data
        return _mask_credentials_bytes(_mask(data, self._bytes, MASK.encode()) if self._bytes else data)

    def data(self, value):
        """A JSON-like value with every string in it (keys included) masked: mask before
        serialising, so that a secret holding `"` or `\\` is caught as itself."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(key): self.data(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.data(item) for item in value)
        return value

    def safe_end(self, data: bytes) -> int:
        """How much of `data` (a stream's bytes so far, more to come) can be masked and let go
        now: all but the last longest-1 bytes (a secret may start there and end in what comes
        next), and back to the start of the word there (a URL cut there would lose its
        credentials' pattern), moved past any secret that straddles that point."""
        end = max(0, len(data) - (self.longest - 1)) if self._bytes else len(data)
        end = _word_start(data, end)
        if not self._bytes:
            return end
        for start, stop in _spans(data, self._bytes):
            if start < end < stop:
                end = stop
        return end

    def mask_file(self, path: Path) -> bool:
        """Mask a file in place, a block at a time; True if anything was masked."""
        if not path.is_file():
            return False
        masked = False
        tmp = path.with_name(path.name + ".masking")
        try:
            with path.open("rb") as source, tmp.open("wb") as target:
                carry = b""
                while True:
                    block = source.read(BLOCK)
                    data = carry + block
                    end = self.safe_end(data) if block else len(data)
                    head = self.chunk(data[:end])
                    masked |= head != data[:end]
                    target.write(head)
                    carry = data[end:]
                    if not block:
                        break
            if masked:
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return masked


def mask_credentials(text: str) -> str:
    """`text` with URL passwords and the values of credential-named query parameters as ***."""
    if "://" in text:
        text = USERINFO.sub(lambda match: f"{match[1]}{MASK}@", text)
    if "=" not in text or ("?" not in text and "&" not in text) or not _has_credential_word(text):  # most lines: done
        return text
    parts, position = [], 0
    for match in PARAMETER.finditer(text):
        if match.start() < position or not _credential_name(match[1]):
            continue  # inside a value masked already, or an ordinary parameter
        value = VALUE.match(text, match.end())
        if value:
            parts += [text[position : match.end()], MASK]
            position = value.end()
    return "".join([*parts, text[position:]]) if parts else text


def _has_credential_word(text: str) -> bool:
    """No such word anywhere: no such parameter (substring searches: far cheaper than a regex)."""
    lowered = text.lower()
    return "sig" in lowered or any(word in lowered for word in CREDENTIAL_WORDS)


def _credential_name(name: str) -> bool:
    name = name.lower()
    return name == "sig" or any(word in name for word in CREDENTIAL_WORDS)


def _mask_credentials_bytes(data: bytes) -> bytes:
    """mask_credentials on bytes that need not be UTF-8 (surrogateescape gives back every byte)."""
    if b"://" not in data and b"=" not in data:
        return data
    return mask_credentials(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _word_start(data: bytes, end: int) -> int:
    """`end`, moved back to the start of the word (run of non-space bytes) it cuts, if that word
    is at most URL_SPAN long so far: a longer word is taken for no URL."""
    floor = max(0, end - URL_SPAN)
    space = max(data.rfind(byte, floor, end) for byte in SPACES)
    if space >= 0:
        return space + 1
    return 0 if floor == 0 else end


def as_bytes(text: str) -> bytes:
    """The bytes a str stands for: a secret from os.environ may hold bytes that are not UTF-8, which
    Python decodes as lone surrogates (surrogateescape) and which this gives back as themselves; any
    other lone surrogate (from JSON's \\udXXX) is written as UTF-8 would if it allowed them."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _needles(values: tuple[str, ...]) -> tuple[str, ...]:
    """What to look for: each value (and line of it), as is, JSON-escaped, and percent-encoded
    (a password quoted into a URL, %40 for @, is still the password); a value holding bytes that
    are not UTF-8 also with those bytes as `\\xff` (Python's repr of bytes, backslashreplace)."""
    found: set[str] = set()
    for value in values:
        lines = value.splitlines()
        parts = [value]
        if len(lines) > 1:
            parts += [part for line in lines for part in (line, line.strip()) if len(part) >= MIN_LINE]
        for part in parts:
            raw = as_bytes(part)  # percent-encoding quotes bytes: those the value stands for
            found.update(
                (
                    part,
                    json.dumps(part)[1:-1],
                    json.dumps(part, ensure_ascii=False)[1:-1],
                    quote(raw, safe=""),
                    quote_plus(raw, safe=""),
                )
            )
            found.add(
                raw.decode("utf-8", "backslashreplace")
            )  # bytes that are not UTF-8 as Python shows them: b'\\xff'
    return tuple(sorted(found, key=len, reverse=True))


def _spans(subject: AnyStr, needles: tuple[AnyStr, ...]) -> list[tuple[int, int]]:
    """Where the needles occur in `subject`, overlapping occurrences merged, in order."""
    spans = []
    for needle in needles:
        start = subject.find(needle)
        while start >= 0:
            spans.append((start, start + len(needle)))
            start = subject.find(needle, start + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, stop in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


def _mask(subject: AnyStr, needles: tuple[AnyStr, ...], mask: AnyStr) -> AnyStr:
    if not any(needle in subject for needle in needles):
        return subject
    parts, position = [], 0
    for start, stop in _spans(subject, needles):
        parts += [subject[position:start], mask]
        position = stop
    parts.append(subject[position:])
    return subject[:0].join(parts)
