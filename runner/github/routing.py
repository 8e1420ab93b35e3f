"""Which GitHub runner takes a training job: the labels its `runs-on:` needs, and a check, made by
the planning job, that an online self-hosted runner of the repository has them all (else the
training job would wait in GitHub's queue for a day before failing).

GitHub gives a job to a runner that has every label of `runs-on`, compared as whole words
(ignoring case). Labels therefore say what a runner is (`gpu`, `a100`, `docker`, `tftrain-pool`),
never how much of something it has: a 4-GPU runner labelled `gpus-4` would never take a job
asking for `gpus-2`. How many GPUs a job uses is decided where it runs (the pool target places
jobs by free GPUs)."""

from __future__ import annotations

from runner.errors import PlacementError
from runner.github.workflow import failure
from runner.manifest.model import effective_target
from runner.shared.catalog import docker_here, row_of

SHOWN_RUNNERS = 10
SCOPE_NOTE = "this check sees the repository's own runners, not its organization's"


def runs_on(manifest) -> list[str]:
    """The labels a self-hosted runner needs to train this manifest (for `runs-on:`)."""
    compute = manifest.compute
    target = effective_target(manifest)
    labels = ["self-hosted", "linux"]
    dispatcher = row_of(target).runner_label
    if dispatcher:  # the runner only dispatches to the target's hosts: GPUs and Docker are theirs, not its
        labels.append(dispatcher)
    else:
        if manifest.use_gpu:
            labels += ["gpu", compute.gpu_type] if compute.gpu_type else ["gpu"]
        if manifest.use_docker or docker_here(target):
            labels.append("docker")
    return unique(labels + compute.runner_labels)


def unique(labels: list[str]) -> list[str]:
    """The labels without repeats (GitHub ignores case), first spelling kept."""
    seen: set[str] = set()
    kept = []
    for label in labels:
        if label.casefold() not in seen:
            seen.add(label.casefold())
            kept.append(label)
    return kept


def check_runners(github, repository: str, labels: list[str], logger) -> None:
    """Fail (PlacementError) when no online self-hosted runner of `repository` has all `labels`.

    Listing runners needs Administration: read on the repository, which the job's GITHUB_TOKEN
    never has: when the token is refused, the check is skipped with a warning, not failed."""
    from github import GithubException
    from requests import RequestException

    try:
        runners = list(github.get_repo(repository).get_self_hosted_runners())
    except (GithubException, RequestException) as exc:
        logger.warning(_skipped(repository, exc))
        return
    wanted = {label.casefold() for label in labels}
    online = [r for r in runners if r.status == "online" and wanted <= {name.casefold() for name in label_names(r)}]
    if online:
        idle = [r.name for r in online if not r.busy]
        names = ", ".join(r.name for r in online)
        if idle:
            logger.info(
                f"runner check: {len(online)} online runner(s) of {repository} can train this ({names}); idle:"
                f" {', '.join(idle)}"
            )
        else:
            logger.info(
                f"runner check: every runner of {repository} that can train this is busy ({names}); the job will queue"
            )
        return
    if not runners:
        raise PlacementError(
            f"{repository} has no self-hosted runners: add one with the labels {', '.join(labels)} "
            f"(Settings → Actions → Runners); {SCOPE_NOTE}"
        )
    raise PlacementError(
        f"no online self-hosted runner of {repository} has the labels {', '.join(labels)}; "
        f"its runners: {describe(runners)}; {SCOPE_NOTE}"
    )


def label_names(runner) -> list[str]:
    return [label["name"] for label in runner.labels]


def describe(runners: list) -> str:
    """`name (status: labels)` for the first runners, and how many more there are."""
    text = ", ".join(f"{r.name} ({r.status}: {', '.join(label_names(r))})" for r in runners[:SHOWN_RUNNERS])
    more = len(runners) - SHOWN_RUNNERS
    return text + (f" … and {more} more" if more > 0 else "")


def _skipped(repository: str, exc) -> str:
    """Why the check was skipped: a token that may not list runners, or GitHub not answering."""
    if getattr(exc, "status", None) in (403, 404):
        return (
            f"runner check skipped: this token cannot list the self-hosted runners of {repository}: {failure(exc)}. "
            "The job's GITHUB_TOKEN never can: give a token with Administration: read on the repository "
            "as the action input runners-token (INPUT_RUNNERS_TOKEN)"
        )
    return f"runner check skipped: could not list the runners of {repository}: {failure(exc)}"
