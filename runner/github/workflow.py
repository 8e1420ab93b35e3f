"""GitHub: the workflow's context, the fork policy, and the sticky pull-request comment that
compares a run with the latest released model. The API is reached through PyGithub, at the
context's API URL (GitHub Enterprise, or a test server), never assembled by hand."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.errors import FatalError, ServiceError, UnsupportedError, answered, path_of, unreachable
from runner.settings import DEFAULT_TAG_TEMPLATE, GitHubContext
from runner.shared.refs import number
from runner.telemetry.point import TELEMETRY

MARKER = "<!-- tftrain:model={name} -->"


def fork_refusal(context: GitHubContext, allow_forks: bool, label: str) -> str | None:
    """Why this event must not train here, or None. GitHub's own advice: never run a fork's code
    on a self-hosted runner unreviewed."""
    pr = context.pull_request
    if not pr:
        return None
    head = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
    base = ((pr.get("base") or {}).get("repo") or {}).get("full_name") or context.repository
    if not head or head == base or allow_forks:
        return None
    if label in {item.get("name") for item in pr.get("labels") or []}:
        return None
    return (
        f"refusing to train pull request #{pr.get('number')} from the fork {head}: its code would run on this runner. "
        f"Review it, then add the label '{label}' to the pull request, or set allow-forks: true"
    )


def client(context: GitHubContext):
    from github import Auth, Github
    from urllib3.util.retry import Retry

    if not context.token:
        raise UnsupportedError(
            "no GitHub token: pass github-token to the action (default: the job's GITHUB_TOKEN), or set GITHUB_TOKEN"
        )
    if not context.repository:
        raise UnsupportedError("no repository: set GITHUB_REPOSITORY=owner/name (Actions sets it)")
    # Reads retry on 5xx here; uploads (POST) retry in publish.py, which knows how to check them.
    # When the retries run out, the last answer is returned, so its status reaches the error.
    retry = Retry(total=3, backoff_factor=0.25, status_forcelist=(500, 502, 503, 504), raise_on_status=False)
    return Github(auth=Auth.Token(context.token), base_url=context.api_url, retry=retry)


@contextmanager
def github_errors(error: type[FatalError] = ServiceError) -> Iterator[None]:
    """Turn what PyGithub and requests raise for a failed call into `error`: one line naming the
    call and GitHub's answer (see failure)."""
    from github import GithubException
    from requests import RequestException

    try:
        yield
    except (GithubException, RequestException) as exc:
        raise error(failure(exc)) from None


def failure(exc: BaseException) -> str:
    """`GitHub: GET /repos/o/r/issues/7 answered 404 Not Found`, or `… got no answer: REASON`."""
    from github import GithubException

    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        return answered("GitHub", _call_of(exc), exc.status, data.get("message") or exc.message)
    request = getattr(exc, "request", None)
    call = f"{request.method} {path_of(request.url)}" if request is not None else "a request"
    response = getattr(exc, "response", None)  # an asset download: requests' HTTPError
    if response is not None:
        return answered("GitHub", call, response.status_code, response.reason)
    return unreachable("GitHub", call, exc)


def _call_of(exc) -> str:
    """`VERB /path` of the request a GithubException answers. PyGithub raises it inside
    Requester.requestJsonAndCheck(verb, url, …) and its siblings, whose arguments name the request."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        url = frame.f_locals.get("url")
        if frame.f_globals.get("__name__") == "github.Requester" and isinstance(url, str):
            if url.startswith("/"):  # relative to the API's base URL, which may have a path (GitHub Enterprise)
                url = getattr(frame.f_locals.get("self"), "base_url", "") + url
            return f"{frame.f_locals.get('verb', 'GET')} {path_of(url)}"
        tb = tb.tb_next
    return "a request"


@dataclass(frozen=True)
class TagTemplate:
    """How releases of a model are tagged: `{name}-v{version}` unless the input tag-template says
    (checked when the settings are resolved)."""

    text: str = DEFAULT_TAG_TEMPLATE

    def tag(self, name: str, version: int) -> str:
        return self.text.format(name=name, version=version)

    def version(self, name: str, tag: str) -> int | None:
        before, _, after = self.text.format(name=name, version="\0").partition("\0")
        match = re.fullmatch(re.escape(before) + r"([0-9]+)" + re.escape(after), tag)
        return number(match[1]) if match else None  # runner.shared.refs: v01 or 30 digits is no version


def releases_of(repo, name: str, template: TagTemplate, drafts: bool = False) -> list[tuple[int, object]]:
    """(version, release) of every release of `name` (published only, unless `drafts`), the
    highest version first: a version's number, not the API's order, says which is newest."""
    found = [(template.version(name, r.tag_name), r) for r in repo.get_releases() if drafts or not r.draft]
    return sorted(((v, r) for v, r in found if v is not None), key=lambda item: item[0], reverse=True)


def baseline_metrics(repo, model: str, template: TagTemplate) -> tuple[str, dict] | None:
    """(tag, metrics.json) of the newest published release of `model` that has one, or None.
    ServiceError when GitHub does not answer, or the file is not a JSON object."""
    with github_errors():
        for _, release in releases_of(repo, model, template):
            asset = next((asset for asset in release.get_assets() if asset.name == "metrics.json"), None)
            if asset is not None:
                return release.tag_name, _json_object(asset, release.tag_name)
    return None


def release_json(repo, model: str, template: TagTemplate, tag: str, name: str) -> dict | None:
    """The JSON asset `name` of the release `tag` of `model`, or None when it has none (a release
    made before tftrain wrote that asset)."""
    with github_errors():
        for _, release in releases_of(repo, model, template):
            if release.tag_name == tag:
                asset = next((asset for asset in release.get_assets() if asset.name == name), None)
                return _json_object(asset, tag) if asset is not None else None
    return None


def signature_report(serving: dict | None, released: dict | None, tag: str) -> str:
    """Markdown: how this model's serving signatures differ from the released one's ("breaking:
    input `x` shape (None, 16) → (None, 32)"); empty when neither has been through the gate."""
    from runner.serving.signature import changes, signatures_from_json

    if serving is None or released is None:
        return ""
    found = changes(
        signatures_from_json(released.get("signatures") or {}), signatures_from_json(serving.get("signatures") or {})
    )
    if not found:
        return f"Serving signature: unchanged since {tag}.\n"
    head = (
        "**Serving signature changed**"
        if any(line.startswith("breaking") for line in found)
        else "Serving signature changed"
    )
    return f"{head} since {tag}:\n\n" + "".join(f"- {line}\n" for line in found)


def _json_object(asset, tag: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / asset.name
        asset.download_asset(str(target))
        try:
            data = json.loads(target.read_text())
        except ValueError:  # UnicodeDecodeError too
            data = None
    if not isinstance(data, dict):
        raise ServiceError(f"GitHub: {asset.name} of {tag} is not a JSON object")
    return data


def comparison(
    summary: dict, baseline: tuple[str, dict] | None, missing: str | None = None
) -> tuple[str, float | None]:
    """A Markdown table of this run against the baseline, and how much worse the primary metric is;
    without a baseline, `missing` (why it could not be fetched) or a note that there is none yet."""
    if baseline is None:
        return (missing or "No released model to compare with yet.") + "\n", None
    tag, base = baseline
    primary = summary.get("primary")
    mine, theirs = summary.get("metrics", {}), base.get("metrics", {})
    shared = [name for name in mine if name in theirs]
    # the GPUs' telemetry (system/gpu0/utilization, …) is the usage line's business, not a metric to win
    names = ([primary] if primary in shared else []) + [
        name for name in shared if name != primary and not name.startswith(TELEMETRY)
    ][:5]
    rows = [f"| metric | this run | {tag} | delta | |", "|---|---|---|---|---|"]
    worse_by = None
    for name in names:
        now, then, goal = _number(mine[name]["last"]), _number(theirs[name]["last"]), mine[name]["goal"]
        if now is None or then is None:
            continue
        delta = now - then
        better = delta > 0 if goal == "maximize" else delta < 0
        verdict = "better" if better else ("same" if delta == 0 else "worse")
        label = f"**{name}**" if name == primary else name
        rows.append(f"| {label} | {now:.4g} | {then:.4g} | {delta:+.4g} | {verdict} |")
        if name == primary:
            worse_by = -delta if goal == "maximize" else delta
    return "\n".join(rows) + "\n", worse_by


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def upsert_comment(repo, number: int, model: str, body: str) -> str:
    """Edit the comment this model's runs left on the pull request, or post the first one."""
    marker = MARKER.format(name=model)
    issue = repo.get_issue(number)
    for comment in issue.get_comments():
        if marker in (comment.body or ""):
            comment.edit(f"{marker}\n{body}")
            return comment.html_url
    return issue.create_comment(f"{marker}\n{body}").html_url
