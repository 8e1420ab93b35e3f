"""`tftrain deploy`'s smoke test for an image serving a scoring script (runner.serving.scoring.server):
the container answered `GET /` (init() ran); with a key, `POST /score` without it must be 401; the
version's sample request (model.serving.sample_request) is posted in the script's own shape and its
answer must be JSON and match what run() answered in the gate (numbers within TOLERANCE)."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

from runner.errors import DeployError

TOLERANCE = 1e-4


def smoke_scoring(base: str, files, token: str | None, logger) -> None:
    scoring = files.scoring
    if token:
        status, _ = post(f"{base}/score", b'{"data": []}', None)
        if status != 401:
            raise DeployError(
                f"smoke test: /score without the key was answered {status}, not 401: the image does not enforce the key"
            )
        logger.info("smoke test: /score without the key was refused (401)")
    sample = files.root / "scoring" / "sample-request.json"
    if not scoring.get("sample_request") or not sample.is_file():
        logger.info(
            f"smoke test: ready: {scoring['script']}'s init() completed (GET / answered; no sample request recorded)",
            style="green",
        )
        return
    status, body = post(f"{base}/score", sample.read_bytes(), token)
    if status != 200:
        raise DeployError(
            f"smoke test: /score answered the sample request {status}: {body[:300].decode(errors='replace')}"
        )
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        raise DeployError("smoke test: /score answered the sample request with something that is not JSON") from None
    expected = files.root / "scoring" / "answer.json"
    if expected.is_file():
        try:  # the release's answer.json matches serving.json's sha256, but whoever wrote one wrote both
            difference = differs(answer, json.loads(expected.read_text(encoding="utf-8")))
        except (ValueError, RecursionError) as exc:
            raise DeployError(
                f"smoke test: {expected} cannot be compared: {type(exc).__name__}: {str(exc)[:200]}"
            ) from None
        if difference:
            raise DeployError(f"smoke test: /score's answer to the sample request is not the gate's: {difference}")
        logger.info("smoke test: /score answers the sample request as run() did in the gate", style="green")
    else:
        logger.info("smoke test: /score answered the sample request with JSON", style="green")


def post(url: str, body: bytes, token: str | None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers, method="POST"), timeout=60) as answer:
            return answer.status, answer.read(1 << 20)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(1 << 20)
    except OSError as exc:
        raise DeployError(f"smoke test: POST {url} failed: {exc}") from None


def differs(have, want, where: str = "the answer") -> str | None:
    """Where two JSON documents differ (numbers within TOLERANCE), or None."""
    if isinstance(want, bool) or isinstance(have, bool):
        return None if have is want else f"{where} is {have!r}, not {want!r}"
    if isinstance(want, (int, float)) and isinstance(have, (int, float)):
        return (
            None
            if math.isclose(have, want, rel_tol=TOLERANCE, abs_tol=TOLERANCE)
            else f"{where} is {have!r}, not {want!r}"
        )
    if isinstance(want, list) and isinstance(have, list):
        if len(have) != len(want):
            return f"{where} has {len(have)} items, not {len(want)}"
        return next(
            (found for index, pair in enumerate(zip(have, want)) if (found := differs(*pair, f"{where}[{index}]"))),
            None,
        )
    if isinstance(want, dict) and isinstance(have, dict):
        if have.keys() != want.keys():
            return f"{where} has the keys {sorted(have)}, not {sorted(want)}"
        return next((found for key in want if (found := differs(have[key], want[key], f"{where}[{key!r}]"))), None)
    return None if have == want else f"{where} is {str(have)[:80]!r}, not {str(want)[:80]!r}"
