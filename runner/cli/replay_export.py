"""tftrain replay export REQUESTS --warmup FILE --model REF (routed here by runner.cli.replay): recorded
or committed requests as TensorFlow Serving's warmup file (runner.replay.warmup), in the tensors of
REF's signature.

REQUESTS: a recording directory (`tftrain serve --record`) or a JSON Lines request file. REF (for
the signature: NAME@vN, NAME@latest, a run id or release:NAME@vN) is checked out as `tftrain serve`
checks it out; its serving/serving.json (the gate's) says the signature's inputs, dtypes and shapes.
FILE is new: an existing file or a link there is refused, nothing is overwritten.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from runner.errors import ServingError, UsageError


def run(requests: Path, warmup: Path, model: str, logger) -> int:
    from runner.replay.sources import load_requests
    from runner.replay.warmup import tensorflow_modules, write_warmup
    from runner.serving.records import RequestsError

    check_target(warmup)
    tensorflow_modules()  # MissingExtra before anything is read or checked out
    try:
        loaded = load_requests(requests)
    except RequestsError as exc:
        raise UsageError(str(exc)) from None
    signature, name = model_signature(model, logger)
    try:
        write_warmup(loaded, warmup, signature, name, logger)
    except FileExistsError:
        raise UsageError(
            f"{warmup}: already there (made while the requests were converted): nothing overwritten"
        ) from None
    except RequestsError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a directory that takes no file (read-only, /proc), a full disk
        from runner.history.rundir import space_error

        raise space_error(exc, warmup) or UsageError(
            f"--warmup {warmup}: cannot be written ({exc.strerror or exc}): nothing left there"
        ) from None
    return 0


def check_target(path: Path) -> None:
    """UsageError unless `path` is a new file's name in an existing directory."""
    if path.is_symlink() or path.exists():
        raise UsageError(
            f"--warmup {path}: already there{' (a link)' if path.is_symlink() else ''}: give a new file's name, nothing"
            " is overwritten"
        )
    if not path.parent.is_dir():
        raise UsageError(f"--warmup {path}: {path.parent} is not a directory")


def model_signature(ref: str, logger):
    """(the signature REF was gated with, REF's model name): serving.json's "signatures" entry named
    by its "signature"; ServingError for a version without one (registered before the gate wrote it)."""
    from runner.cli.releases import github_repo, release_errors
    from runner.paths import tftrain_home
    from runner.serving.refs import COPY_PREFIX, checked_out
    from runner.serving.signature import signatures_from_json

    class Options:  # what github_repo's settings read from the command line: nothing here
        pass

    with (
        tempfile.TemporaryDirectory(prefix=COPY_PREFIX) as workspace,
        release_errors(ref),
        checked_out(ref, logger, lambda: github_repo(Options()), Path(workspace), tftrain_home()) as served,
    ):
        serving = served.directory.serving()
        if not serving:
            raise ServingError(
                f"{served.label}: no serving/serving.json (registered before the gate wrote one): its signature is"
                " unknown"
            )
        chosen = serving.get("signature")
        try:
            signatures = signatures_from_json(serving.get("signatures") or {})
        except (KeyError, TypeError, AttributeError, ValueError):
            raise ServingError(
                f"{served.label}: serving/serving.json's signatures are not as the gate writes them"
            ) from None
        if not isinstance(chosen, str) or chosen not in signatures:
            raise ServingError(
                f"{served.label}: serving/serving.json names no signature it records ({str(chosen)[:80]!r})"
            )
        return signatures[chosen], served.name
