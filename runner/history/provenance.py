"""provenance.intoto.json: how a registered version was built, as SLSA v1 provenance in an in-toto
Statement v1.

The subjects are the version's model files with their sha256, exactly SHA256SUMS's lines. The
predicate is read from what the run already recorded, never recomputed: run.json (run id, git
commit and dirty flag, attempt, sweep trial, phases) and manifest.lock.yml (the resolved manifest,
the environment with its image and TensorFlow, the inputs with their digests, the plan). Only the
manifest file's own sha256 and the curated TensorFlow set's are hashed here.

Both files are the run's own writing but sit in a directory others may write to: they are read
bounded and as regular files, and whatever they hold is copied as data, never followed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import runner
from runner.history import untrusted
from runner.history.recordchecks import is_time
from runner.history.regular import open_regular

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:tftrain:buildtype:run:v1"  # docs/signing.md says what it holds
LOCAL_BUILDER = "urn:tftrain:builder:local"
FILE = "provenance.intoto.json"
MAX_RECORD_BYTES = 64 << 20  # run.json and manifest.lock.yml: a package list, a plan


@dataclass(frozen=True)
class BuildFacts:
    """What the provenance says of a run, gathered from its records (`gather`)."""

    run: dict  # run.json
    lock: dict  # manifest.lock.yml (empty when the run never wrote one)
    manifest_sha256: str | None  # of the manifest file, when it is still there to read
    curated: dict | None  # {"release", "file", "sha256"} of the curated TensorFlow set used
    workflow: dict  # the workflow run, when in one: workflow_ref, server_url, repository, run_id, run_attempt
    left_out: tuple[str, ...] = ()  # records read as absent (runner.history.untrusted refused them), one line each


def statement(sums: dict[str, str], extras: dict[str, str], facts: BuildFacts, finished: float) -> dict:
    """The in-toto Statement: `sums` (SHA256SUMS of model/) are the subjects; `extras` (the files kept
    beside model/, by their path in the version) are byproducts."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": digest}} for name, digest in sums.items()],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"buildDefinition": _build_definition(facts), "runDetails": _run_details(facts, extras, finished)},
    }


def _build_definition(facts: BuildFacts) -> dict:
    run, lock = facts.run, facts.lock
    manifest = _resolved_manifest(run, lock)
    environment = _dict(lock.get("environment"))
    plan = _dict(lock.get("plan"))
    return {
        "buildType": BUILD_TYPE,
        "externalParameters": {
            "manifest": {
                "path": lock.get("manifest_path"),
                "sha256": facts.manifest_sha256,
                "resolved": manifest,
                "resolved_sha256": hashlib.sha256(_canonical(manifest)).hexdigest(),
            },
            "target": plan.get("target") or _dict(manifest.get("compute")).get("target"),
        },
        "internalParameters": {
            "tftrain_version": lock.get("tftrain_version") or runner.__version__,
            "run_id": run.get("run_id"),
            "attempt": run.get("attempt"),
            "sweep": run.get("sweep"),
            "launcher": plan.get("launcher"),
            "processes": len(tasks) if isinstance(tasks := plan.get("tasks"), list) else 0,
            "environment": {
                key: environment.get(key)
                for key in ("description", "framework_version", "image", "image_id", "base_image")
            },
            "curated_tensorflow": facts.curated,
        },
        "resolvedDependencies": _dependencies(facts),
    }


def _dependencies(facts: BuildFacts) -> list[dict]:
    run, lock = facts.run, facts.lock
    git = _dict(run.get("git") or lock.get("git"))
    found = []
    if git.get("commit"):
        workflow = facts.workflow
        repository = workflow.get("repository")
        server = workflow.get("server_url") or "https://github.com"
        found.append(
            {
                "uri": f"git+{server}/{repository}@{git['commit']}" if repository else f"git:{git['commit']}",
                "digest": {"gitCommit": git["commit"]},
                "annotations": {
                    "dirty": bool(git.get("dirty")),
                    "branch": git.get("branch"),
                    "tags": git.get("tags") or [],
                },
            }
        )
    for name, spec in sorted(_dict(lock.get("inputs")).items()):
        spec = spec if isinstance(spec, dict) else {}
        found.append({"name": f"input:{name}", "uri": _uri(spec.get("source")), **_sha256(spec.get("sha256"))})
    environment = _dict(lock.get("environment"))
    if environment.get("image"):
        image_id = str(environment.get("image_id") or "")
        algorithm, _, digest = image_id.partition(":")
        found.append(
            {
                "name": "image",
                "uri": f"docker:{environment['image']}",
                **({"digest": {algorithm: digest}} if digest else {}),
            }
        )
    if facts.curated:
        found.append({"name": f"curated:{facts.curated['file']}", **_sha256(facts.curated["sha256"])})
    return found


def _run_details(facts: BuildFacts, extras: dict[str, str], finished: float) -> dict:
    run, workflow = facts.run, facts.workflow
    phases = run.get("phases") if isinstance(run.get("phases"), list) else []
    started = next((phase.get("started") for phase in map(_dict, phases) if phase.get("phase") == "Running"), None)
    server = workflow.get("server_url") or "https://github.com"
    ref = workflow.get("workflow_ref")
    builder = {"id": f"{server}/{ref}" if ref else LOCAL_BUILDER, "version": {"tftrain": runner.__version__}}
    invocation = run.get("run_id")
    if workflow.get("run_id") and workflow.get("repository"):
        attempt = workflow.get("run_attempt") or "1"
        invocation = f"{server}/{workflow['repository']}/actions/runs/{workflow['run_id']}/attempts/{attempt}"
    return {
        "builder": builder,
        "metadata": {
            "invocationId": invocation,
            "startedOn": _rfc3339(started or run.get("created")),
            "finishedOn": _rfc3339(finished),
        },
        "byproducts": [{"name": name, "digest": {"sha256": digest}} for name, digest in sorted(extras.items())],
    }


def _dict(value) -> dict:
    """`value` when the records hold a mapping there, else {}: a field of another type reads as absent."""
    return value if isinstance(value, dict) else {}


def _resolved_manifest(run: dict, lock: dict) -> dict:
    return _dict(lock.get("manifest") or run.get("manifest"))


def _uri(source) -> str | None:
    if isinstance(source, list):
        return " ".join(map(str, source))
    return None if source is None else str(source)


def _sha256(digest) -> dict:
    return {"digest": {"sha256": digest}} if isinstance(digest, str) and digest else {}


def _rfc3339(seconds) -> str | None:
    if not is_time(seconds):  # 1e300 is a number, and an OverflowError in gmtime
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


def _canonical(data) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def to_bytes(document: dict) -> bytes:
    return (json.dumps(document, indent=2, sort_keys=False) + "\n").encode()


# --- gathering what the run recorded ----------------------------------------------------------

WORKFLOW_KEYS = ("workflow_ref", "server_url", "repository", "run_id", "run_attempt")


def gather(run_json: Path, lock_file: Path, workflow, manifest_path: Path | None = None) -> BuildFacts:
    """The facts from a run's run.json and manifest.lock.yml (either may be missing: a run that never
    started has no lock), `workflow` (runner.settings.GitHubContext's fields, or a mapping of them), the manifest file's
    sha256 (`manifest_path`, when the caller loaded it;
    else the one the lock names) and the curated set's."""
    left_out: list[str] = []
    run = _read_json(run_json, left_out)
    lock = _read_yaml(lock_file, left_out)
    manifest_path = str(manifest_path) if manifest_path is not None else lock.get("manifest_path")
    manifest = _resolved_manifest(run, lock)
    framework = _dict(lock.get("environment")).get("framework_version") or manifest.get("framework_version")
    return BuildFacts(
        run=run,
        lock=lock,
        manifest_sha256=_file_sha256(Path(manifest_path)) if isinstance(manifest_path, str) else None,
        curated=_curated(framework if isinstance(framework, str) else None),
        workflow={key: str(value) for key in WORKFLOW_KEYS if (value := _field(workflow, key))},
        left_out=tuple(left_out),
    )


def _field(workflow, key: str):
    return workflow.get(key) if isinstance(workflow, dict) else getattr(workflow, key, None)


def _bounded(path: Path) -> bytes | None:
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_RECORD_BYTES else None


def _read_json(path: Path, left_out: list[str]) -> dict:
    """run.json as runner.history.untrusted reads it; a record it refuses reads as absent, and is
    said in `left_out` (a missing one is not: a run that never started has none)."""
    try:
        value = untrusted.read_json(path)
    except OSError:
        return {}
    except ValueError as exc:
        left_out.append(str(exc))
        return {}
    return value if isinstance(value, dict) else {}


def _read_yaml(path: Path, left_out: list[str]) -> dict:
    try:
        value = untrusted.read_yaml(path)  # bounded, no aliases, no 5,000-digit numbers
    except OSError:
        return {}
    except ValueError as exc:
        left_out.append(str(exc))
        return {}
    # as JSON would hold it: YAML's dates and non-string keys (1:, null:) would fail the statement's json.dumps
    return json.loads(json.dumps(value, default=str, skipkeys=True)) if isinstance(value, dict) else {}


def _file_sha256(path: Path) -> str | None:
    data = _bounded(path)
    return hashlib.sha256(data).hexdigest() if data is not None else None


def _curated(framework_version: str | None) -> dict | None:
    from runner.frameworks.curated import constraint_set

    try:
        found = constraint_set(framework_version) if framework_version else None
    except (OSError, ValueError):
        return None
    if found is None:
        return None
    return {
        "release": found.release,
        "file": found.path.name,
        "sha256": hashlib.sha256(found.text.encode()).hexdigest(),
        "tensorflow": found.tensorflow,
    }


def write(path: Path, document: dict) -> str:
    """Write the statement to the new file `path`; its sha256."""
    data = to_bytes(document)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with open(fd, "wb") as handle:
        handle.write(data)
    return hashlib.sha256(data).hexdigest()
