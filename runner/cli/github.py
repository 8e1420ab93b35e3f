"""tftrain github check | runs-on | comment: the action's steps around `tftrain run` on GitHub."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

from runner.errors import ForkRefused, Regression, ServiceError, UnsupportedError
from runner.github import routing, workflow
from runner.history.rundir import RunPaths
from runner.history.untrusted import optional_mapping
from runner.manifest import load_manifest
from runner.paths import tftrain_home
from runner.settings import Settings, resolve
from runner.targets.leftovers import open_history


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="github_command", required=True)
    check = sub.add_parser("check", help="refuse a fork's pull request unless allowed")
    # a flag left out is None: the input ($INPUT_*) or the default holds (runner.settings)
    check.add_argument("--allow-forks")
    check.add_argument("--fork-label")
    labels = sub.add_parser(
        "runs-on", help="the runner labels the manifest needs, as JSON (and the step output runs-on)"
    )
    labels.add_argument("-f", "--file", default="tftrain.yml", help="the manifest")
    labels.add_argument(
        "--check-runners",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "fail unless an online self-hosted runner of the repository has the labels "
            "(default: when a token is set: $INPUT_RUNNERS_TOKEN, else $INPUT_GITHUB_TOKEN or $GITHUB_TOKEN)"
        ),
    )
    comment = sub.add_parser("comment", help="post or update the run's comment on the pull request")
    comment.add_argument("--run", default="latest", help="run id (default: latest)")
    comment.add_argument(
        "--no-comment",
        dest="post",
        action="store_false",
        default=None,
        help="only compare (and check fail-on-regression); post nothing",
    )
    comment.add_argument(
        "--fail-on-regression",
        help=(
            "with evaluation: the verdict's margin, failing on the verdict worse; else fail when the primary metric is "
            "worse than the released model's by more than this"
        ),
    )
    comment.add_argument(
        "--verdict-confidence", help="the verdict's confidence (default: the manifest's evaluation.confidence)"
    )


def run(args, logger) -> int:
    settings = resolve(os.environ, args)
    if args.github_command == "runs-on":
        return _runs_on(args, settings, logger)
    if args.github_command == "check":
        inputs = settings.inputs
        refusal = workflow.fork_refusal(settings.github, inputs.allow_forks, inputs.fork_label)
        if refusal:
            raise ForkRefused(refusal)
        return 0
    return _comment(settings, args, logger)


def _runs_on(args, settings: Settings, logger) -> int:
    labels = routing.runs_on(load_manifest(args.file).manifest)
    logger.text(json.dumps(labels))
    logger.outputs({"runs-on": json.dumps(labels)})
    if args.check_runners is False:
        return 0
    context = dataclasses.replace(settings.github, token=settings.inputs.runners_token or settings.github.token)
    if context.token and context.repository:
        routing.check_runners(workflow.client(context), context.repository, labels, logger)
    elif args.check_runners:
        raise UnsupportedError(
            "--check-runners needs a token (INPUT_RUNNERS_TOKEN or GITHUB_TOKEN) and GITHUB_REPOSITORY"
        )
    else:
        missing = (
            "no GITHUB_REPOSITORY"
            if context.token
            else "no token (give one with Administration: read as the action input runners-token)"
        )
        logger.info(f"runner check skipped: {missing}")
    return 0


def _comment(settings: Settings, args, logger) -> int:
    with open_history(tftrain_home(), logger.warning) as store:  # the comment states the run's status
        run = store.run(args.run)
    paths = RunPaths.of_run(run)[1]
    summary = optional_mapping(
        paths.metrics_summary, logger.warning
    )  # the run's files: a comment does without a bad one
    body = paths.summary.read_text(errors="replace") if paths.summary.is_file() else f"run {run.run_id}: {run.status}\n"
    record = optional_mapping(paths.record, logger.warning)
    if record.get("sweep"):  # the best trial of a sweep: its trials table first
        from runner.sweep.book import sweep_summary

        body = (sweep_summary(tftrain_home(), record) or "") + "\n" + body
    context, limit = settings.github, settings.inputs.fail_on_regression
    client = workflow.client(context)
    template = workflow.TagTemplate(settings.inputs.tag_template)
    baseline, missing = _baseline(client, context.repository, run.name, template, limit, logger)
    table, worse_by = workflow.comparison(summary, baseline, missing)
    judgement = None
    # the verdict replaces the point comparison, and decides fail-on-regression
    if record.get("evaluation") is not None:
        from runner.verdict.pull_request import release_verdict

        released = f"{run.name}@v{template.version(run.name, baseline[0])}" if baseline else None
        table, judgement = release_verdict(record, paths.root, released, missing, settings, logger)
        worse_by = None
    table += _signature_note(client, context.repository, run.name, template, baseline, paths, logger)
    table += _usage_note(client, context.repository, run.name, template, baseline, record, summary, logger)
    pr = context.pull_request
    if pr and settings.inputs.comment:
        with workflow.github_errors():  # only a comment that cannot be posted fails the step
            repo = client.get_repo(context.repository)
            _post(
                repo,
                int(pr["number"]),
                run.name,
                f"{body}\n### Compared with the last released model\n\n{table}",
                logger,
            )
    else:
        logger.info("no comment: " + ("not a pull request" if not pr else "comment: false"))
    logger.step_summary(f"### Compared with the last released model\n\n{table}")
    if judgement is not None:
        logger.outputs({"verdict": judgement.verdict.value})
        if limit is not None and judgement.verdict.value == "worse":
            raise Regression(f"the verdict is worse: {judgement.line()}")
    if limit is not None and worse_by is not None and worse_by > limit:
        primary = summary.get("primary")
        raise Regression(
            f"{primary} is worse than {baseline[0]}'s by {worse_by:.4g}, more than fail-on-regression ({limit:g})"
        )
    return 0


def _signature_note(client, repository: str, model: str, template, baseline, paths: RunPaths, logger) -> str:
    """The serving signature against the released model's (both through the gate), or nothing."""
    if baseline is None or not (paths.serving / "serving.json").exists():
        return ""
    serving = optional_mapping(paths.serving / "serving.json", logger.warning)
    if not serving:
        return ""
    try:
        released = workflow.release_json(client.get_repo(repository), model, template, baseline[0], "serving.json")
    except ServiceError as exc:
        logger.warning(f"the released model's serving signature could not be fetched: {exc}")
        return ""
    return "\n" + workflow.signature_report(serving, released, baseline[0]) if released else ""


def _usage_note(client, repository: str, model: str, template, baseline, record: dict, summary: dict, logger) -> str:
    """This run's GPU-hours and cost against the last release's usage.json ("+12 % GPU-hours for +0.4 % accuracy")."""
    from runner.history.usage import usage_from, usage_of
    from runner.telemetry.usage_report import brief, change_line

    usage = usage_of(record)
    if usage is None:
        return ""
    if baseline is None:
        return f"\nUsage: {brief(usage)}.\n"
    try:
        released = workflow.release_json(client.get_repo(repository), model, template, baseline[0], "usage.json")
    except ServiceError as exc:
        logger.warning(f"the released model's usage could not be fetched: {exc}")
        released = None
    return "\n" + change_line(usage, usage_from(released), summary, baseline[1], baseline[0])


def _baseline(
    client, repository: str, model: str, template: workflow.TagTemplate, limit: float | None, logger
) -> tuple[tuple[str, dict] | None, str | None]:
    """(tag, metrics) of the last released model, or None and why it could not be fetched: the
    comment then goes without the comparison, saying so."""
    try:
        with workflow.github_errors():
            repo = client.get_repo(repository)
        return workflow.baseline_metrics(repo, model, template), None
    except ServiceError as exc:
        missing = f"The last released model could not be fetched, so this run is not compared with it: {exc}"
    logger.warning(missing)
    if limit is not None:
        logger.warning(f"fail-on-regression ({limit:g}) was not checked: there is no baseline to compare with")
    return None, missing


def _post(repo, number: int, model: str, text: str, logger) -> None:
    from github import GithubException

    try:
        url = workflow.upsert_comment(repo, number, model, text)
    except GithubException as exc:
        if exc.status != 403:
            raise
        logger.annotate(
            "notice",
            "not commenting: this token cannot write to the pull request (a fork's pull request gets a read-only"
            " token)",
        )
        logger.info("not commenting: the token is read-only")
        return
    logger.info(f"pull request comment: {url}")
