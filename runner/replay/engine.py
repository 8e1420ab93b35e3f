"""The replay: the same requests sent to a candidate and to its baseline, each served the way
`tftrain serve` serves it (runner.serving.launch: its own process and serving environment, on a
free port of 127.0.0.1, behind a key made for the replay), and their answers compared
(runner.replay.compare) into a ReplayReport.

Both servers start at once and are warmed (the server checks its sample before it opens its port;
the first requests are sent once more, not counted). Then `concurrency` workers send each request to
both sides at the same instant, so that each side sees the same requests at the same concurrency
under the same load, and the replay takes about as long as one side alone.
Every request has a time limit, the whole replay a deadline; a request that gets no answer is
status 0 (no answer), never an exception.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.errors import FatalError, ReplayError
from runner.replay.compare import Agreement, Difference, compare, is_classifier, read_answer
from runner.replay.latency import p99, p99_ratio
from runner.replay.report import SHOWN_IDS, Disagreement, Latency, OutputDelta, ReplayReport, StatusDifference
from runner.replay.sending import NO_ANSWER, Sent, Side, exchange
from runner.serving.launch import BackgroundServer, ServerOptions, told
from runner.serving.records import Request
from runner.serving.refs import Served

WARM_REQUESTS = 20  # TensorFlow traces and the server's first calls: never in the latencies compared


@dataclass(frozen=True)
class ReplayOptions:
    concurrency: int = 4
    tolerance: float = 1e-3
    timeout_seconds: float = 30.0  # one request
    deadline_seconds: float = 3600.0  # the whole replay, once both servers are ready
    origin: str = ""  # where the requests came from, for the report's line


def replay(
    requests: list[Request], candidate: Served, baseline: Served | None, options: ReplayOptions, logger, log_dir: Path
) -> ReplayReport:
    """Send `requests` to `candidate` and `baseline` (None: the candidate alone) and compare; the
    servers' logs go to `log_dir` (candidate.log, baseline.log). ReplayError (one line) when a side
    cannot start, or the two take different inputs."""
    with contextlib.ExitStack() as stack:
        sides = _start(stack, [candidate] + ([baseline] if baseline is not None else []), options, logger, log_dir)
        if len(sides) == 2:
            _check_same_inputs(*sides)
        for side in sides:  # warmed on real requests, not counted
            for request in requests[:WARM_REQUESTS]:
                side.send("POST", side.path(request), request.encoded())
        logger.info(
            f"replay: {len(requests)} requests to {' and '.join(side.server.served.label for side in sides)}, "
            f"{options.concurrency} at a time each"
        )
        answers = _send_all(sides, requests, options)
        for side in sides:
            side.close()
        _check_alive(sides, answers)
    return _report(requests, candidate, baseline, answers, options)


def _ended(side: Side) -> int | None:
    """The side's server's exit status when it has ended (negative: the signal that ended it), else None."""
    process = side.server.process
    return None if process is None else process.poll()


def _check_alive(sides: list[Side], answers: list[list[Sent]]) -> None:
    """ReplayError (one line) when a side's server ended during the replay: what it said last, how many
    requests it answered, where its log is. Its answers after that say nothing of the model."""
    for side, sent in zip(sides, answers):
        status = _ended(side)
        if status is None:
            continue
        how = f"killed by signal {-status}" if status < 0 else f"exit {status}"
        answered = sum(1 for item in sent if item.status != 0)
        raise ReplayError(
            f"{side.server.served.label}'s model server ended during the replay ({how}) after answering {answered} of"
            f" {len(sent)} requests: {told(side.server.tail)} (log: {side.server.log})"
        )


def _start(
    stack: contextlib.ExitStack, served: list[Served], options: ReplayOptions, logger, log_dir: Path
) -> list[Side]:
    """Every side's server, started at once; all stopped (by `stack`) when one cannot start."""
    tokens = [secrets.token_urlsafe(24) for _ in served]
    servers = [
        BackgroundServer(item, log_dir / f"{role}.log", logger, ServerOptions(token=token))
        for item, role, token in zip(served, ("candidate", "baseline"), tokens)
    ]
    with ThreadPoolExecutor(len(servers)) as pool:
        futures = [pool.submit(server.__enter__) for server in servers]
    failures = []
    for server, future in zip(servers, futures):
        try:
            future.result()
            stack.push(server.__exit__)
        except FatalError as exc:
            failures.append(f"{server.served.label}: {exc}" if server.served.label not in str(exc) else str(exc))
    if failures:
        raise ReplayError(f"the replay cannot start: {'; '.join(failures)}")
    return [Side(server, token, options.timeout_seconds) for server, token in zip(servers, tokens)]


def _check_same_inputs(candidate: Side, baseline: Side) -> None:
    """Both sides take the same inputs (the default signature's names, dtypes and shapes), or both are
    scoring scripts: replaying one side's requests against another API says nothing."""
    if candidate.scoring != baseline.scoring:
        which = candidate if candidate.scoring else baseline
        raise ReplayError(
            f"{which.server.served.label} is served by its scoring script (/score) and the other by "
            "TensorFlow Serving's API: their answers cannot be compared"
        )
    if candidate.scoring:
        return
    signatures = [_inputs(side) for side in (candidate, baseline)]
    if signatures[0] != signatures[1]:
        shown = [
            ", ".join(f"{name} {dtype}" for name, dtype in sorted(found.items())) or "unknown" for found in signatures
        ]
        raise ReplayError(
            f"the two versions take different inputs: {candidate.server.served.label} ({shown[0]}), "
            f"{baseline.server.served.label} ({shown[1]}): replay requests of the new signature with `tftrain replay`"
        )


def _inputs(side: Side) -> dict[str, str]:
    name = side.server.served.name
    sent = side.send("GET", f"/v1/models/{name}/metadata")
    try:
        defs = sent.body["metadata"]["signature_def"]["signature_def"]
        chosen = defs.get("serving_default") or next(iter(defs.values()))
        return {str(key): _described(value) for key, value in chosen["inputs"].items()}
    except (TypeError, KeyError, AttributeError, StopIteration):
        return {}


def _described(tensor: dict) -> str:
    """An input as metadata says it: its dtype and shape, "DT_FLOAT (-1, 64)"."""
    shape = tensor.get("tensor_shape") or {}
    dims = (
        "unknown rank"
        if shape.get("unknown_rank")
        else ", ".join(str(dim.get("size")) for dim in shape.get("dim") or [])
    )
    return f"{tensor.get('dtype')} ({dims})"


def _send_all(sides: list[Side], requests: list[Request], options: ReplayOptions) -> list[list[Sent]]:
    """Each side's answers, in the requests' order. `concurrency` workers; each writes its request to
    every side before reading any answer (runner.replay.sending), so that both answer each request
    under the same load: a latency ratio then compares like with like."""
    deadline = time.monotonic() + options.deadline_seconds
    answers: list[list[Sent]] = [[NO_ANSWER] * len(requests) for _ in sides]

    def one(index: int) -> None:
        if time.monotonic() > deadline or any(_ended(side) is not None for side in sides):  # nothing more to learn
            return
        request = requests[index]
        paths = [side.path(request) for side in sides]
        for side_index, sent in enumerate(exchange(sides, "POST", paths, request.encoded(), reverse=index % 2 == 1)):
            answers[side_index][index] = sent

    with ThreadPoolExecutor(options.concurrency, thread_name_prefix="replay") as workers:
        for done in [workers.submit(one, index) for index in range(len(requests))]:
            done.result()
    return answers


def _report(
    requests: list[Request],
    candidate: Served,
    baseline: Served | None,
    answers: list[list[Sent]],
    options: ReplayOptions,
) -> ReplayReport:
    mine = answers[0]
    theirs = answers[1] if baseline is not None else None
    common = dict(
        candidate=candidate.label,
        baseline=baseline.label if baseline else None,
        origin=options.origin,
        requests=len(requests),
        tolerance=options.tolerance,
        concurrency=options.concurrency,
        candidate_latency=_latency(mine),
    )
    if theirs is None:
        answered = sum(1 for sent in mine if sent.status == 200)
        return ReplayReport(**common, answered=answered, agreed=answered)
    tally = _Tally(options.tolerance)
    for request, a, b in zip(requests, mine, theirs):
        tally.add(request.id, a, b)
    paired = [(a.seconds, b.seconds) for a, b in zip(mine, theirs) if a.status == 200 and b.status == 200]
    ratio = p99_ratio([a for a, _ in paired], [b for _, b in paired])
    return ReplayReport(
        **common,
        answered=tally.answered,
        agreed=tally.agreed,
        by=tally.by or Agreement.VALUES,
        outputs=tally.outputs(),
        disagreeing=len(tally.disagreeing),
        worst=tally.worst(),
        status_differences=len(tally.statuses),
        candidate_failed=tally.failed,
        statuses=tally.statuses[:SHOWN_IDS],
        baseline_latency=_latency(theirs),
        latency_ratio_low=ratio.low if ratio else None,
        latency_ratio_high=ratio.high if ratio else None,
    )


class _Tally:
    """The comparison of every request answered by both, as it goes."""

    def __init__(self, tolerance: float) -> None:
        self.tolerance = tolerance
        self.by: Agreement | None = None
        self.answered = self.agreed = self.failed = 0
        self.max_abs: dict[str, float] = {}
        self.mean_sum: dict[str, float] = {}
        self.counted: dict[str, int] = {}
        self.disagreeing: list[tuple[float, str]] = []
        self.statuses: list[StatusDifference] = []

    def add(self, request_id: str, a: Sent, b: Sent) -> None:
        if a.status != b.status:
            self.statuses.append(StatusDifference(id=request_id, candidate=a.status, baseline=b.status))
            if b.status == 200:  # the baseline answered it: the candidate's failure counts against its agreement
                self.failed += 1
                self.disagreeing.append((float("inf"), request_id))
            return
        if a.status != 200:
            return
        self.answered += 1
        mine, theirs = read_answer(a.body), read_answer(b.body)
        if mine is None or theirs is None:  # answers tftrain cannot read as outputs: the same bytes or not
            same, difference = a.body == b.body, None
        else:
            if self.by is None:
                self.by = Agreement.TOP_CLASS if is_classifier(mine) and is_classifier(theirs) else Agreement.VALUES
            difference = compare(mine, theirs, self.tolerance, self.by)
            same = difference.same
            self._measure(difference)
        if same:
            self.agreed += 1
        else:
            self.disagreeing.append((difference.largest if difference else float("inf"), request_id))

    def _measure(self, difference: Difference) -> None:
        for name, largest in difference.max_abs.items():
            self.max_abs[name] = max(self.max_abs.get(name, 0.0), largest)
            self.mean_sum[name] = self.mean_sum.get(name, 0.0) + difference.mean_abs[name]
            self.counted[name] = self.counted.get(name, 0) + 1

    def outputs(self) -> dict[str, OutputDelta]:
        def finite(value: float) -> float | None:
            return None if value == float("inf") else value

        return {
            name: OutputDelta(
                max_abs=finite(self.max_abs[name]), mean_abs=finite(self.mean_sum[name] / self.counted[name])
            )
            for name in self.max_abs
        }

    def worst(self) -> list[Disagreement]:
        ranked = sorted(self.disagreeing, key=lambda item: (-item[0], item[1]))[:SHOWN_IDS]
        return [
            Disagreement(id=request_id, max_abs=None if largest == float("inf") else largest)
            for largest, request_id in ranked
        ]


def _latency(sent: list[Sent]) -> Latency | None:
    seconds = [item.seconds for item in sent if item.status == 200]
    if not seconds:
        return None
    return Latency(p50_ms=float(np.percentile(seconds, 50)) * 1000, p99_ms=p99(seconds) * 1000)
