"""`resume_from`: a registered model, an earlier run (its outputs, or with `checkpoint:RUN_ID` the
latest checkpoint it synced to S3), or a path, made available to the script.

The script finds it in $TFTRAIN_RESUME_FROM, or as an argument with
`script_params: {--resume-from: {resume_from: true}}`. Models and runs are copied into the new
run first, so a script that writes to its checkpoint never changes the registry or an old run.
The copies follow the registry's rules: a registered version is checked against its SHA256SUMS
as it is copied (damage is a RegistryError, exit 6), a release is extracted by runner.history.archive,
and an earlier run's outputs are copied as regular files and directories (the rest is skipped
and listed in a warning).
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import DiskFullError, FatalError, NotFoundError, PreparingError, RegistryError, StorageError
from runner.history.checksums import EntryKind, copy_tree, fresh_dir, kind_of, skipped_note
from runner.history.model_registry import Registry, checkout
from runner.history.rundir import RunPaths
from runner.history.store import Store
from runner.settings import Settings


def resolve_resume(ref: str, base_dir: Path, store: Store, target: Path, logger, settings: Settings) -> Path:
    if ref.startswith("checkpoint:"):
        return _synced_checkpoint(ref[len("checkpoint:") :], store, target)
    if ref.startswith("model:"):
        try:
            return checkout(Registry(store).resolve(ref[len("model:") :]), target)
        except FatalError as exc:
            raise _failed(exc) from None
    if ref.startswith("release:"):
        from runner.github import workflow
        from runner.github.publish import pull_release

        context = settings.github
        try:
            with workflow.github_errors():
                pull_release(
                    workflow.client(context).get_repo(context.repository),
                    ref[len("release:") :],
                    target,
                    logger,
                    settings,
                )
        except FatalError as exc:
            raise _failed(exc) from None
        entries = list(target.iterdir())
        return entries[0] if len(entries) == 1 and entries[0].is_file() else target
    path = (base_dir / ref).resolve()
    if path.exists():
        return path
    try:
        run = store.run(ref)
    except NotFoundError:
        raise PreparingError(
            f"resume_from: {ref!r} is neither model:NAME@vN, a run id, nor an existing path (looked in {base_dir})"
        ) from None
    manifest, paths = RunPaths.of_run(run)
    model_path = paths.workdir / manifest.model.path
    source = model_path if model_path.exists() else paths.outputs
    kind = kind_of(source)
    if kind not in (EntryKind.FILE, EntryKind.DIRECTORY):
        what = "no outputs" if kind is None else f"{kind.described} where its outputs should be"
        raise PreparingError(f"resume_from: run {run.run_id} has {what} to resume from ({source})")
    with fresh_dir(target) as staging:
        copied = copy_tree(source, staging)
    if copied.skipped:
        logger.warning(f"resume_from: {skipped_note(copied.skipped, str(source))}")
    return target / source.name if kind is EntryKind.FILE else target


def _synced_checkpoint(run_id: str, store: Store, target: Path) -> Path:
    from runner.training.checkpoints import latest_checkpoint  # boto3, only when resuming from S3

    try:
        path = latest_checkpoint(run_id, target, store)
    except FatalError as exc:
        raise _failed(exc) from None
    if path is None:
        raise PreparingError(f"resume_from: run {run_id} has synced no complete checkpoint yet")
    return path


def _failed(exc: FatalError) -> FatalError:
    """A damaged or refused model keeps its own exit code (6, or 22 for a full disk); anything
    else (not found, not published) is a preparing error."""
    if isinstance(exc, (RegistryError, DiskFullError, StorageError)):
        return type(exc)(f"resume_from: {exc}")
    return PreparingError(f"resume_from: {exc}")
