"""One error type per failure class; each carries the exit code `tftrain` ends with. And how a
failed call to an outside service is worded in their messages (`answered`, `unreachable`)."""

from __future__ import annotations

import re


class FatalError(Exception):
    """An expected failure: printed as one line, no traceback."""

    exit_code = 1


class UsageError(FatalError):
    """The command line asks for something it must not do (overwrite a file without --force)."""

    exit_code = 2


class ManifestError(FatalError):
    """The manifest (or another config file) is invalid."""

    exit_code = 3


class PreparingError(FatalError):
    """Snapshot, environment or inputs could not be prepared."""

    exit_code = 4


class NotFoundError(FatalError):
    """A run, model version or file named on the command line does not exist."""

    exit_code = 5


class RegistryError(FatalError):
    """The model registry refused an operation (checksum mismatch, missing model)."""

    exit_code = 6


class UnsupportedError(FatalError):
    """The manifest asks for something this version cannot do on this machine."""

    exit_code = 7


class BuildError(PreparingError):
    """docker build failed; the message names the failing step."""

    exit_code = 8


class DockerError(FatalError):
    """The Docker daemon cannot be reached, or refused to run the container."""

    exit_code = 9


class PlanError(FatalError):
    """The launch cannot be planned: ports in use, ranks that do not exist."""

    exit_code = 13


class ClusterError(FatalError):
    """The Kubernetes API refused the job, or could not be reached."""

    exit_code = 14


class TrainingFailed(FatalError):
    """The training process exited non-zero."""

    exit_code = 10


class TrainingTimedOut(FatalError):
    """max_run_duration_seconds was reached."""

    exit_code = 11


class TrainingCanceled(FatalError):
    """tftrain was interrupted (SIGINT/SIGTERM) and stopped the training."""

    exit_code = 12


class ForkRefused(FatalError):
    """Training code from a fork would run on this (self-hosted) runner."""

    exit_code = 16


class Regression(FatalError):
    """The primary metric is worse than the baseline's by more than fail-on-regression."""

    exit_code = 15


class PublishError(FatalError):
    """The model version could not be published (the release, if any, stays a draft)."""

    exit_code = 17


class StorageError(FatalError):
    """The object store refused, a download does not match its pointer, or a sweep's study storage cannot be reached."""

    exit_code = 18


class PlacementError(FatalError):
    """No runner or pool host can take the job: now (bad constraints, too big) or before the queue timeout."""

    exit_code = 19


class HostError(FatalError):
    """A pool host is unreachable or unfit (no docker, no GPU runtime, driver too old)."""

    exit_code = 20


class HistoryError(FatalError):
    """The run history (TFTRAIN_HOME/tftrain.db) is damaged or unreadable; `tftrain doctor` rebuilds it."""

    exit_code = 21


class DiskFullError(FatalError):
    """No space left (or quota exceeded) while writing a file; what was written so far is kept."""

    exit_code = 22


class ServiceError(FatalError):
    """An outside service (the GitHub API) answered with an HTTP error or could not be reached."""

    exit_code = 23


class MissingExtra(FatalError):
    """A feature's optional dependencies (a pip extra of tf-train-action) are not installed."""

    exit_code = 24


class SweepError(FatalError):
    """A sweep could not go on: no trial completed, the objective metric is never reported, the
    study cannot be found or joined."""

    exit_code = 25


class ServingError(FatalError):
    """A model version cannot be served: no loadable model (or no model.onnx for the ONNX
    runtime), or the model server stopped before it was ready."""

    exit_code = 26


class DeployError(FatalError):
    """A serving image could not be made, proven or published: no loadable model in the version,
    an invalid image name, a smoke test that failed, a registry that refused the push."""

    exit_code = 27


class ModelGateError(FatalError):
    """The trained model failed the gate: it does not load, has no serving signature, fails its
    sample prediction, or its required ONNX export failed or differs from TensorFlow's outputs."""

    exit_code = 28


class SignatureError(FatalError):
    """A model version's signature (model.sig) is missing, is not a signature, was not made with the
    key given, or does not cover the files as they are (one changed, added or removed); or signing
    could not be done (a bad key, Sigstore out of reach)."""

    exit_code = 29


class BudgetReached(FatalError):
    """A sweep's budget (sweep.limits.max_cost, max_gpu_hours) stopped it before max_total_trials:
    the next trial would have passed it, or a trial had no cost to count. Nothing was overspent;
    the best trial's model is registered."""

    exit_code = 30


class BudgetPassed(FatalError):
    """A sweep spent more than its budget (sweep.limits.max_cost, max_gpu_hours): the trials that
    were running when the estimate still allowed them cost more than it said. The best trial's model
    is registered."""

    exit_code = 31


class EvidenceError(FatalError):
    """Per-example evidence (evaluation.per_example) cannot be used: missing, not a regular file,
    not JSON Lines/CSV/npz, a row without its id or metric, a value that is not a finite number, an
    id twice, over the size limits; or the two sides share no example."""

    exit_code = 32


class ReplayError(FatalError):
    """The replay (model.replay, `tftrain replay`) refused the candidate or could not run: its answers
    to the replayed requests disagree with the baseline's more than allowed, it is slower than allowed,
    the requests cannot be read, or a side cannot start or has another signature."""

    exit_code = 33


def extra_module(name: str, extra: str, feature: str):
    """`import name` for a feature that needs the pip extra `extra`: the top-level package, as
    the import statement binds it, or one line naming the extra to install."""
    import importlib
    import sys

    try:
        importlib.import_module(name)
    except ImportError:
        raise MissingExtra(
            f"{feature} needs {name.partition('.')[0]}: pip install 'tf-train-action[{extra}]' (in the action: extras:"
            f" {extra})"
        ) from None
    return sys.modules[name.partition(".")[0]]


# --- How a failed call to an outside service (GitHub, S3, a registry, Kubernetes) is worded: one
# line naming the service, the call and the status, e.g. `GitHub: GET /repos/o/r/issues/7 answered
# 404 Not Found`. Each service's module turns its client's exceptions into its own error with these;
# URLs are shown without their query string (a presigned URL's signature is a credential).
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
        inner = [
            e
            for e in (getattr(current, "reason", None), current.__cause__, current.__context__, *current.args)
            if isinstance(e, BaseException)
        ]
        if not inner:
            innermost = current
        todo += [e for e in inner if id(e) not in seen]
        seen.update(id(e) for e in inner)
    innermost = innermost or exc
    text = one_line(str(innermost)) or type(innermost).__name__
    return QUERY.sub("", WRAPPER.sub("", ERRNO.split(text)[-1]))


def path_of(url: str) -> str:
    """A URL's path alone: its query string may be a presigned URL's signature."""
    from urllib.parse import urlsplit  # only where a URL is worded: not on every start

    return urlsplit(url).path or "/"


def one_line(text: str) -> str:
    return " ".join(text.split())


def _phrase(status: int | None) -> str:
    from http import HTTPStatus  # only where a status is worded: not on every start

    try:
        return HTTPStatus(status).phrase if status else ""
    except ValueError:
        return ""


# Not a FatalError: a signal between a target's poll and the supervising loop, never printed.
class Vanished(Exception):
    """Raised by a poll for a process that is gone without an exit code (its container removed
    under the run): nothing will ever end it, so the run must not wait for its deadline."""


def error_class(exit_code: int) -> type[FatalError]:
    """The error type that ends tftrain with `exit_code`."""
    todo = [FatalError]
    while todo:
        cls = todo.pop()
        if cls.exit_code == exit_code:
            return cls
        todo += cls.__subclasses__()
    return FatalError
