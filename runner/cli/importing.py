"""tftrain import azureml PATH: write a tftrain.yml from an Azure ML job (read, never run)."""

from __future__ import annotations

from pathlib import Path

from runner.errors import ManifestError, UsageError
from runner.importer import import_azureml
from runner.importer.draft import Draft
from runner.importer.manifest_writer import render_manifest, render_report, report_rows
from runner.manifest import DEFAULT_NAME, load_manifest

REPORT_NAME = "tftrain-import-report.md"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="import_from", metavar="FROM")
    sub.required = True
    azureml = sub.add_parser(
        "azureml",
        help="an Azure ML job: SDK v1 .py/.ipynb (TensorFlow, Estimator, ScriptRunConfig) or a v2 command job .yml",
    )
    azureml.add_argument("path", metavar="PATH", help="the .py, .ipynb or .yml that defines the job (only read)")
    azureml.add_argument(
        "-o", "--output", default=DEFAULT_NAME, help=f"the manifest to write (default: ./{DEFAULT_NAME})"
    )
    azureml.add_argument("--force", action="store_true", help="overwrite the manifest if it exists")
    azureml.add_argument(
        "--deployment",
        metavar="YAML",
        help="a v2 managed online deployment (code_configuration, environment, instance_type) → model.serving",
    )


def run(args, logger) -> int:
    source, output = Path(args.path), Path(args.output)
    if source.exists() and output.exists() and output.resolve() == source.resolve():
        raise UsageError(f"{output}: is the file being imported; give another -o")
    draft = import_azureml(source, output)  # only reads: the input's errors come first
    if args.deployment:
        from runner.importer.azureml_deployment import apply_deployment

        apply_deployment(draft, Path(args.deployment), output.resolve().parent)
    if output.exists() and not args.force:
        raise UsageError(f"{output}: exists; give --force to overwrite it, or another -o")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_manifest(draft), encoding="utf-8")
    _validate(draft, output)
    report = output.with_name(REPORT_NAME)
    report.write_text(render_report(draft, str(source), str(output)), encoding="utf-8")
    rows = report_rows(draft)
    if rows:
        logger.table(f"tftrain import azureml {source}", ["kind", "what", "where"], rows)
    todo = draft.todo_count()
    logger.info(f"wrote {output} from {draft.origin} ({todo} TODO) and {report}", style="yellow" if todo else "green")
    return 0


def _validate(draft: Draft, output: Path) -> None:
    """What `tftrain validate` says of the written manifest goes into the report."""
    try:
        loaded = load_manifest(output)
    except ManifestError as exc:
        for line in str(exc).splitlines():
            draft.note("todo", f"tftrain validate: {line}")
        return
    for warning in loaded.warnings:
        draft.note("info", f"tftrain validate: {warning}")
