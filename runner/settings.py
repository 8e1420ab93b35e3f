"""A command's settings, resolved once: the action's inputs, the workflow's GitHub context, and the
facts the logger needs about the job it prints to.

Each input is looked up in order: its command-line flag, the action input ($INPUT_NAME), then
$TFTRAIN_NAME, then its default (as cibuildwheel resolves its options). An empty variable counts as
unset: GitHub sets an input nobody gave to ''. A value that does not parse is one line naming where
it came from, e.g. `input fail-on-regression: 'abc' is not a number`.

Only this module and runner/cli/ read INPUT_* and GITHUB_*: runner/cli/ resolves once and hands
each part what it needs, so the library stays testable with plain values. So too the variables that
set limits deep inside (TFTRAIN_MAX_ARCHIVE_*: ArchiveLimits), what the machine lets tftrain use
(CUDA_VISIBLE_DEVICES) and where its clients point (KUBECONFIG, pip's CA variables: MachineClients):
read here, carried in Settings.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from runner.errors import FatalError, UnsupportedError, UsageError

if TYPE_CHECKING:
    from runner.targets.slurm.array_jobs import ArrayTicket

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_TAG_TEMPLATE = "{name}-v{version}"
GITHUB_ASSET_LIMIT = 2 * 1024**3
PR_EVENTS = ("pull_request", "pull_request_target")
DEFAULT_MAX_ARCHIVE_BYTES = 256 << 30
DEFAULT_MAX_ARCHIVE_ENTRIES = 1_000_000


# The settings' parts are frozen dataclasses: resolved once at the edge (resolve() parses and checks
# every value), then handed down unchanged; plain data, so reading them costs no validation library.
@dataclass(frozen=True, kw_only=True)
class GitHubContext:
    """What the workflow run says about itself: the event, the repository, where the API is."""

    event_name: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict, hash=False)
    ref: str = ""
    repository: str = ""
    api_url: str = DEFAULT_API_URL
    server_url: str = ""
    run_id: str = ""
    token: str | None = None
    workflow_ref: str = ""  # OWNER/REPO/.github/workflows/F.yml@REF: the builder a model's provenance names
    run_attempt: str = ""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> GitHubContext:
        return cls(
            event_name=environ.get("GITHUB_EVENT_NAME", ""),
            payload=_event_payload(environ.get("GITHUB_EVENT_PATH")),
            ref=environ.get("GITHUB_REF", ""),
            repository=environ.get("GITHUB_REPOSITORY", ""),
            api_url=environ.get("GITHUB_API_URL", DEFAULT_API_URL),
            server_url=environ.get("GITHUB_SERVER_URL", ""),
            run_id=environ.get("GITHUB_RUN_ID", ""),
            workflow_ref=environ.get("GITHUB_WORKFLOW_REF", ""),
            run_attempt=environ.get("GITHUB_RUN_ATTEMPT", ""),
            token=environ.get("INPUT_GITHUB_TOKEN") or environ.get("GITHUB_TOKEN") or None,
        )

    @property
    def pull_request(self) -> dict | None:
        return self.payload.get("pull_request") if self.event_name in PR_EVENTS else None

    @property
    def run_url(self) -> str | None:
        """The workflow run's page, when this runs in one."""
        if self.server_url and self.repository and self.run_id:
            return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"
        return None


def _event_payload(path: str | None) -> dict:
    if not path or not Path(path).is_file():
        return {}
    try:
        payload = json.loads(Path(path).read_text())
    except ValueError:  # UnicodeDecodeError too
        payload = None
    except OSError as exc:
        raise UnsupportedError(f"GITHUB_EVENT_PATH: {path} cannot be read: {exc.strerror}") from None
    if not isinstance(payload, dict):
        raise UnsupportedError(f"GITHUB_EVENT_PATH: {path} is not a JSON object")
    return payload


@dataclass(frozen=True, kw_only=True)
class ActionInputs:
    """The action's inputs that tftrain itself reads (the others only reach action.yml's shell)."""

    allow_forks: bool = False
    fork_label: str = "safe-to-train"
    comment: bool = True
    fail_on_regression: float | None = None  # with `evaluation:`, the verdict's margin (it fails on worse alone)
    verdict_confidence: float | None = None  # the verdict's confidence (default: evaluation.confidence)
    tag_pattern: str = "*"
    tag_template: str = DEFAULT_TAG_TEMPLATE
    runners_token: str | None = None
    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_endpoint_url: str | None = None
    sign_keyless: bool = False  # sign registered models with Sigstore as the job (runner.history.signing)


@dataclass(frozen=True, kw_only=True)
class ArchiveLimits:
    """What runner.history.archive extracts at most: bytes of file content and members
    (TFTRAIN_MAX_ARCHIVE_BYTES, TFTRAIN_MAX_ARCHIVE_ENTRIES)."""

    max_bytes: int = DEFAULT_MAX_ARCHIVE_BYTES
    max_entries: int = DEFAULT_MAX_ARCHIVE_ENTRIES

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> ArchiveLimits:
        return cls(
            max_bytes=_positive(environ, "TFTRAIN_MAX_ARCHIVE_BYTES", DEFAULT_MAX_ARCHIVE_BYTES),
            max_entries=_positive(environ, "TFTRAIN_MAX_ARCHIVE_ENTRIES", DEFAULT_MAX_ARCHIVE_ENTRIES),
        )


CA_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


@dataclass(frozen=True, kw_only=True)
class MachineClients:
    """Where this machine's clients point, as its environment says: the kubeconfig ($KUBECONFIG,
    its first file; the Kubernetes target) and the CA bundles pip trusts (CA_VARIABLES, in order;
    copied into a training or serving image's build). Handed to the targets on Settings."""

    kubeconfig: str | None = None
    ca_bundles: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> MachineClients:
        first = (environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
        return cls(
            kubeconfig=first or None, ca_bundles=tuple(environ[name] for name in CA_VARIABLES if environ.get(name))
        )


def _positive(environ: Mapping[str, str], variable: str, default: int) -> int:
    text = environ.get(variable, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) <= 0:
        raise UsageError(f"{variable} must be a positive whole number, not {text!r}")
    return int(text)


class GatePrestart(str, Enum):
    """When the model gate's process may start, on this machine (TFTRAIN_GATE_PRESTART)."""

    AUTO = "auto"  # during the training, once a CPU it may use sits idle; else after the script ended
    NEVER = "never"  # after the script ended

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> GatePrestart:
        text = environ.get("TFTRAIN_GATE_PRESTART", "").strip()
        if not text:
            return cls.AUTO
        try:
            return cls(text.lower())
        except ValueError:
            raise UsageError(f"TFTRAIN_GATE_PRESTART must be auto or never, not {text!r}") from None


@dataclass(frozen=True, kw_only=True)
class Settings:
    github: GitHubContext = field(default_factory=GitHubContext)
    inputs: ActionInputs = field(default_factory=ActionInputs)
    s3_threshold_bytes: int = GITHUB_ASSET_LIMIT  # models over this must go to S3
    archive_limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    cuda_visible_devices: str | None = None  # the GPUs this machine lets tftrain use; None: all that nvidia-smi lists
    machine: MachineClients = field(default_factory=MachineClients)
    gate_prestart: GatePrestart = GatePrestart.AUTO
    # a sweep's trial on Slurm: its place in the sweep's array jobs (runner.targets.slurm.array_jobs); set
    # by runner.sweep.driver for each trial, never read from the environment
    slurm_array: ArrayTicket | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class LoggerSettings:
    """What the logger needs to know about where it prints."""

    actions: bool = False  # in a GitHub Actions job: workflow commands (groups, masks, annotations) on
    color: bool = False  # forced: a CI log renders ANSI colours though it is no terminal
    step_summary: Path | None = None
    output: Path | None = None  # the step's outputs file
    workspace: Path | None = None  # the checkout annotations are relative to

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> LoggerSettings:
        return cls(
            actions=environ.get("GITHUB_ACTIONS") == "true",
            color=bool(environ.get("FORCE_COLOR") or environ.get("GITHUB_ACTIONS")),
            step_summary=_path(environ.get("GITHUB_STEP_SUMMARY")),
            output=_path(environ.get("GITHUB_OUTPUT")),
            workspace=_path(environ.get("GITHUB_WORKSPACE")),
        )


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None


# --- the inputs' parsers: a ValueError's text says what is wrong with the value -----------------
def _text(text: str) -> str:
    return text


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("is not true or false")
    return text.lower() == "true"


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("is not a number") from None


def _tolerance(text: str) -> float:
    """How much worse the primary metric may get: a number, finite and not negative (nan or -1
    would let every regression through, or none)."""
    value = _number(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("is not a finite number ≥ 0")
    return value


def _confidence(text: str) -> float:
    """A verdict's confidence: 0.5 ≤ c < 1 (0.95 is a 95 % interval)."""
    value = _number(text)
    if not (0.5 <= value < 1):
        raise ValueError("is not a confidence between 0.5 and 1 (e.g. 0.95)")
    return value


def _bytes(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError("is not a whole number of bytes")
    return int(text)


def _tag_template(text: str) -> str:
    """Filled in with str.format: only {name} and {version} (once), plain — a stray brace, another
    field, an attribute ({name.upper}) or a format spec would fail or leak at publish time."""
    import string  # its Template pattern compiles on import: only when a template is given

    try:
        fields = [
            (field, spec, conversion)
            for _, field, spec, conversion in string.Formatter().parse(text)
            if field is not None
        ]
    except ValueError as exc:
        raise UnsupportedError(f"tag-template {text!r}: {exc}") from None
    odd = next(
        (field for field, spec, conversion in fields if field not in ("name", "version") or spec or conversion), None
    )
    if odd is not None:
        raise UnsupportedError(f"tag-template {text!r}: only {{name}} and {{version}} are filled in, not {{{odd}}}")
    if [field for field, _, _ in fields].count("version") != 1:
        raise UnsupportedError(f"tag-template {text!r} needs {{version}} (and usually {{name}})")
    return text


def _prefix(text: str) -> str:
    return text.strip("/")


class Option(NamedTuple):
    """One setting: `name` as the action spells its input, what parses it, and its flag's `dest`
    (a flag left out is None). `input`: whether $INPUT_NAME sets it; `tftrain`: whether $TFTRAIN_NAME does."""

    name: str
    parse: Callable[[str], Any]
    flag: str | None = None
    input: bool = True
    tftrain: bool = True

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")

    @property
    def variables(self) -> list[str]:
        upper = self.name.upper().replace("-", "_")
        return [f"INPUT_{upper}"] * self.input + [f"TFTRAIN_{upper}"] * self.tftrain


INPUTS = (
    Option("allow-forks", _boolean, flag="allow_forks"),
    Option("fork-label", _text, flag="fork_label"),
    Option("comment", _boolean, flag="post"),
    Option("fail-on-regression", _tolerance, flag="fail_on_regression"),
    Option("verdict-confidence", _confidence, flag="verdict_confidence"),
    Option("tag-pattern", _text, flag="tag_pattern"),
    Option("tag-template", _tag_template),
    Option("runners-token", _text, tftrain=False),  # tokens come from the action, nowhere else
    Option("s3-bucket", _text),
    Option("s3-prefix", _prefix),
    Option("s3-endpoint-url", _text),
    Option("sign-keyless", _boolean),
)
S3_THRESHOLD = Option("s3-threshold-bytes", _bytes, input=False)


def resolve(environ: Mapping[str, str], args: object = None) -> Settings:
    """The settings of one command: `args` (an argparse namespace, or None) over the environment.
    UsageError (or, for tag-template, UnsupportedError as before) for a value that does not parse."""
    inputs = {}
    for option in INPUTS:
        value = _value(option, environ, args)
        if value is not None:
            inputs[option.field] = value
    threshold = _value(S3_THRESHOLD, environ, args)
    return Settings(
        github=GitHubContext.from_environment(environ),
        inputs=ActionInputs(**inputs),
        s3_threshold_bytes=GITHUB_ASSET_LIMIT if threshold is None else threshold,
        archive_limits=ArchiveLimits.from_environment(environ),
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
        machine=MachineClients.from_environment(environ),
        gate_prestart=GatePrestart.from_environment(environ),
    )


def _value(option: Option, environ: Mapping[str, str], args: object) -> Any:
    """The flag's value, else the first variable set, parsed; None: the default holds."""
    flag = getattr(args, option.flag, None) if option.flag else None
    if flag is not None:
        return _parsed(option, flag, f"--{option.name}") if isinstance(flag, str) else flag
    for variable in option.variables:
        text = environ.get(variable, "")
        if text:
            return _parsed(option, text, f"input {option.name}" if variable.startswith("INPUT_") else variable)
    return None


def _parsed(option: Option, text: str, source: str) -> Any:
    try:
        return option.parse(text)
    except FatalError:
        raise
    except ValueError as exc:
        raise UsageError(f"{source}: {text!r} {exc}") from None


# --- tftrain's own process ------------------------------------------------------------------
# pydantic's plugin loader reads every installed distribution's entry points on the first
# validation (~10 ms of the start); tftrain uses no pydantic plugin. Set for tftrain's own process
# only (a value the user set is kept): the processes started for the user (the training) get the
# environment without it, from user_environment.
OWN_VARIABLES = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
_set_here: set[str] = set()


@contextmanager
def own_process(environ: MutableMapping[str, str]) -> Iterator[None]:
    """OWN_VARIABLES in `environ` (os.environ) while tftrain's command runs; removed after."""
    added = [name for name in OWN_VARIABLES if name not in environ]
    for name in added:
        environ[name] = OWN_VARIABLES[name]
    _set_here.update(added)
    try:
        yield
    finally:
        for name in added:
            environ.pop(name, None)
        _set_here.difference_update(added)


def user_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` as the user set it: without what own_process added for tftrain alone."""
    return {name: value for name, value in environ.items() if name not in _set_here}
