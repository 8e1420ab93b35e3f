"""Image references as Docker reads them (distribution/reference's grammar), checked before a
reference is rendered into a Dockerfile or handed to the daemon:

    reference  := name [":" tag] ["@" digest]
    name       := [domain "/"] path            (at most 255 characters)
    domain     := host [":" port]              (host: DNS labels, or an [IPv6] address)
    path       := component ("/" component)*  component: [a-z0-9]+ joined by ".", "_", "__" or "-"+
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex            (sha256: 64 hex digits, sha512: 128, others >= 32)

Every class of bad input is one line naming the option (UsageError, exit 2; for the manifest's
custom_docker_image, a manifest problem, exit 3): a newline, a space or an empty value never
reaches a template (a newline in FROM would be a line of its own, a `RUN`), and credentials in a
reference are refused without being echoed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.errors import UsageError
from runner.telemetry.masking import MASK, mask_credentials

MAX_NAME = 255
MAX_REFERENCE = 1024  # a name, a tag and a sha512 digest fit with room to spare
SHOWN = 120  # characters of a refused reference quoted in its error
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = rf"{_COMPONENT}(?:/{_COMPONENT})*"
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[+._-][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# The domain is tried first, as Docker does; fullmatch, never `$` (it matches before a final newline).
REFERENCE = re.compile(
    rf"(?P<name>(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH}))(?::(?P<tag>{TAG}))?(?:@(?P<digest>{DIGEST}))?"
)
KNOWN_DIGEST = r"(?:sha256|sha384|sha512):[0-9a-fA-F]*"
DIGEST_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
EXAMPLE = "[registry[:port]/]path[:tag][@sha256:…], e.g. python:3.11-slim"


@dataclass(frozen=True)
class ImageReference:
    """A reference that passed the grammar: safe to render into a Dockerfile or a manifest."""

    name: str  # [domain/]path
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_reference(text: str, option: str) -> ImageReference:
    """`text` (given as `option`) as an image reference, or UsageError saying what is wrong."""
    problem = reference_problem(text)
    if problem:
        raise UsageError(f"{option} {shown(text)}: {problem}")
    match = REFERENCE.fullmatch(text)
    return ImageReference(match["name"], match["tag"], match["digest"])


def reference_problem(text: str) -> str | None:
    """What makes `text` no image reference, in words for the user (never quoting it); None if it is one.
    The manifest's rules use it for custom_docker_image, deploy for its options."""
    problem = _lexical_problem(text)
    match = None if problem else REFERENCE.fullmatch(text)
    if match is None:
        return problem or _grammar_problem(text)
    if match["digest"]:
        algorithm, _, hex_digits = match["digest"].partition(":")
        wanted = DIGEST_LENGTHS.get(algorithm.lower())
        if wanted and len(hex_digits) != wanted:
            return f"a {algorithm} digest has {wanted} hex digits, not {len(hex_digits)}"
    if len(match["name"]) > MAX_NAME:
        return f"the repository name is longer than {MAX_NAME} characters"
    return None


def parse_repository(text: str, option: str) -> str:
    """`text` as a repository to tag and push (a reference without tag or digest)."""
    reference = parse_reference(text, option)
    if reference.tag or reference.digest:
        raise UsageError(
            f"{option} {shown(text)}: give the repository without a tag or digest (tftrain adds NAME-vN and sha-…)"
        )
    return reference.name


def shown(text: str) -> str:
    """`text` as an error quotes it: one line (repr), credentials masked, cut at SHOWN characters."""
    text = mask_credentials(text)
    if "://" not in text and _credentials(text):
        text = f"{MASK}@{text.rpartition('@')[2]}"
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "…")


def _lexical_problem(text: str) -> str | None:
    """What makes `text` no reference before its grammar is looked at, in words for the user."""
    if not text:
        return "is empty: give an image reference " + EXAMPLE
    if len(text) > MAX_REFERENCE:  # before any pattern: their cost grows with the length
        return f"is longer than {MAX_REFERENCE} characters: no image reference is"
    if any(char.isspace() or not char.isprintable() for char in text):
        return "holds a space, newline or control character: a reference is one word, " + EXAMPLE
    if "://" in text:
        return "a reference has no scheme (https://…): give " + EXAMPLE + " (log in with `docker login`)"
    if _credentials(text):
        return (
            "has '@' not followed by a digest (sha256:…); a login (user:password@) never goes in a reference: use"
            " `docker login`"
        )
    return None


def _credentials(text: str) -> bool:
    """A `…@…` whose right side is no digest: `user[:password]@registry/…`. A digest of a known
    algorithm with too few digits is no login (its error says so)."""
    head, at, tail = text.rpartition("@")
    return bool(at) and not (re.fullmatch(DIGEST, tail) or re.fullmatch(KNOWN_DIGEST, tail))


def _grammar_problem(text: str) -> str:
    name = text.partition("@")[0]
    last = name.rpartition("/")[2]
    path = name[: len(name) - len(last)] + last.partition(":")[0]
    digest = text.rpartition("@")[2] if "@" in text else ""
    if re.fullmatch(KNOWN_DIGEST, digest):
        algorithm, _, hex_digits = digest.partition(":")
        return f"a {algorithm} digest has {DIGEST_LENGTHS[algorithm]} hex digits, not {len(hex_digits)}"
    if REFERENCE.fullmatch(text.lower()) and path != path.lower():
        return "the repository path must be lowercase, " + EXAMPLE
    if ":" in last and len(last.partition(":")[2]) > 128:
        return "a tag is at most 128 characters"
    return "is not an image reference " + EXAMPLE
