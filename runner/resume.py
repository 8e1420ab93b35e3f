"""`resume_from`: a registered model, an earlier run, or a path, made available to the script.

The script finds it in $TFTRAIN_RESUME_FROM, or as an argument with
`script_params: {--resume-from: {resume_from: true}}`. Models and runs are copied into the new
run first, so a script that writes to its checkpoint never changes the registry or an old run.
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import FatalError, NotFoundError, PreparingError, RegistryError
from runner.registry import Registry, copy_model, verify
from runner.rundir import RunPaths
from runner.store import Store


def resolve_resume(ref: str, base_dir: Path, store: Store, target: Path, logger) -> Path:
    if ref.startswith("model:"):
        try:
            model = Registry(store).resolve(ref[len("model:") :])
            verify(model)
        except (NotFoundError, RegistryError) as exc:
            raise PreparingError(f"resume_from: {exc}") from None
        if model.info.get("layout") == "file":
            (only,) = model.files_dir.iterdir()
            return copy_model(only, target)
        return copy_model(model.files_dir, target)
    if ref.startswith("release:"):
        from runner import workflow
        from runner.publish import pull_release

        context = workflow.Context.from_env()
        try:
            pull_release(workflow.client(context).get_repo(context.repository), ref[len("release:") :], target, logger)
        except FatalError as exc:
            raise PreparingError(f"resume_from: {exc}") from None
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
    if not source.exists():
        raise PreparingError(f"resume_from: run {run.run_id} has no outputs to resume from ({source})")
    return copy_model(source, target)
