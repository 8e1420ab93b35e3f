"""A fuzz of the manifest loader: every text gives a LoadedManifest or a ManifestError with one
line per problem, never another exception and never a hang.

Derandomized (the same examples every run); TFTRAIN_FUZZ_EXAMPLES sets how many (default 1500,
a few seconds). Every example runs, and the failures are counted before the test fails, so a
long run reports how many there were, not only the first.
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.errors import ManifestError
from runner.manifest import LoadedManifest, load_manifest

EXAMPLES = int(os.environ.get("TFTRAIN_FUZZ_EXAMPLES", "1500"))
HANG_SECONDS = 10  # per example: far above the few milliseconds one takes

VALID = """\
name: demo
source_directory: src
entry_script: train.py
script_params:
  --epochs: 3
  --lr: 0.001
  --layers: [64, 32]
  --data: {input: digits}
  --flag: true
inputs:
  digits: {source: src}
environment_variables: &env
  A: "1"
  B: two
use_gpu: false
node_count: 2
distributed_training:
  backend: parameter_server
  worker_count: 2
  parameter_server_count: 1
compute: {slots_per_node: 4, kill_grace_seconds: 5}
metrics:
  primary: accuracy
  regex: {accuracy: 'acc: ([0-9.]+)'}
  ranks: [0, 1]
model: {path: outputs/model}
"""

TOKENS = [
    "&a ",
    "&b ",
    "*a",
    "*b",
    "<<: ",
    "<<: *a",
    "!!python/object:os.system ",
    "!!binary ",
    "!!set ",
    "!x ",
    "!!int ",
    "!!str ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    ": ",
    "- ",
    "? ",
    "\n",
    "\n  ",
    "\t",
    "  ",
    "'",
    '"',
    "|\n",
    ">-\n",
    "# ",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n",
    "\x00",
    "\\0",
    "\\ud800",
    "\ufeff",
    "\u2028",
    "\r\n",
    "~",
    "null",
    "yes",
    "no",
    "on",
    ".inf",
    ".nan",
    "0x1F",
    "0o17",
    "1:30",
    "1_000",
    "2001-12-14",
    "=",
    "9" * 80,
    "-1",
    "1e999",
    "true",
    "-c",
    "../",
    "/etc/hostname",
    "a=b",
    "\x85",
    "\U0001f600",
    "\u202e",
    "&a [*a]",
    "&a [x, x, x, x, x, x, x, x, x]",
    "&b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
    "[*b, *b, *b, *b, *b, *b, *b, *b, *b]",
]

KEYS = [
    "name",
    "source_directory",
    "entry_script",
    "script_params",
    "framework_version",
    "use_gpu",
    "use_docker",
    "pip_packages",
    "pip_requirements_file",
    "environment_variables",
    "secrets",
    "inputs",
    "node_count",
    "process_count_per_node",
    "distributed_training",
    "compute",
    "outputs_dir",
    "logs_dir",
    "model",
    "metrics",
    "backend",
    "worker_count",
    "parameter_server_count",
    "base_port",
    "ranks",
    "regex",
    "path",
    "input",
    "resume_from",
    "slots_per_node",
    "kill_grace_seconds",
    "max_run_duration_seconds",
    "--x",
    "<<",
]


def mutated(rng: random.Random) -> str:
    """The valid manifest with tokens and random text inserted, spans cut or repeated, lines replaced."""
    text = VALID
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(text))
        kind = rng.choice(["token", "text", "delete", "repeat", "line"])
        if kind == "token":
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif kind == "text":
            text = text[:at] + random_text(rng, 12) + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + rng.randint(1, 40) :]
        elif kind == "repeat":
            text = text[:at] + text[at : at + rng.randint(1, 200)] * rng.randint(2, 20) + text[at:]
        else:
            lines = text.splitlines(keepends=True)
            lines[rng.randrange(len(lines))] = f"{rng.choice(TOKENS)}{rng.choice(KEYS)}: {rng.choice(TOKENS)}\n"
            text = "".join(lines)
    return text


def random_text(rng: random.Random, size: int) -> str:
    alphabet = rng.choice(["ascii", "yaml", "unicode"])
    if alphabet == "unicode":
        points = [
            rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)])
            for _ in range(rng.randint(0, size))
        ]
        if points and rng.random() < 0.05:
            points[0] = rng.randint(0xD800, 0xDFFF)  # a lone surrogate: not UTF-8 once written
        return "".join(map(chr, points))
    chars = "&*!|>'\"{}[],:-#?%@`~=<\t\n \\" if alphabet == "yaml" else "abc09 _-."
    return "".join(rng.choice(chars) for _ in range(rng.randint(0, size)))


def random_value(rng: random.Random, depth: int = 0):
    kind = rng.choice(["scalar", "scalar", "list", "mapping"] if depth < 4 else ["scalar"])
    if kind == "list":
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if kind == "mapping":
        return {
            rng.choice(KEYS) if rng.random() < 0.7 else random_text(rng, 8): random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))
        }
    return rng.choice(
        [
            None,
            True,
            False,
            rng.randint(-5, 5),
            rng.randint(-(10**80), 10**80),
            rng.uniform(-1e6, 1e6),
            float("inf"),
            float("nan"),
            random_text(rng, 20),
            rng.choice(TOKENS),
        ]
    )


def structure(rng: random.Random) -> str:
    """A random document: the required keys (most of the time) and random keys of the manifest, dumped."""
    document = {"name": "demo", "source_directory": "src", "entry_script": "train.py"} if rng.random() < 0.7 else {}
    document.update({rng.choice(KEYS): random_value(rng) for _ in range(rng.randint(0, 6))})
    shape = rng.choice(["mapping", "mapping", "value", "list"])
    data = document if shape == "mapping" else random_value(rng) if shape == "value" else [document]
    return yaml.safe_dump(data, allow_unicode=rng.random() < 0.5, default_flow_style=rng.choice([None, True, False]))


def edited(rng: random.Random) -> str:
    """The valid manifest with a few values replaced or added: what gets past YAML to the checks."""
    document = yaml.safe_load(VALID)
    for _ in range(rng.randint(1, 3)):
        node = document
        while rng.random() < 0.5:
            inner = [key for key, value in node.items() if isinstance(value, dict) and value]
            if not inner:
                break
            node = node[rng.choice(inner)]
        key = rng.choice(list(node)) if rng.random() < 0.6 else rng.choice(KEYS)
        node[key] = random_value(rng, depth=2)
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


def aliased(rng: random.Random) -> str:
    """Anchors and aliases: chains, fan-out, self- and forward references, merge keys, nesting."""
    count = rng.randint(1, 12)
    lines = ["name: demo", "source_directory: src", "entry_script: train.py", "script_params:"]
    for index in range(count):
        items = [f"*a{rng.randint(0, count)}" for _ in range(rng.randint(0, 10))]
        items += [rng.choice(["x", "1", "[]", "{}", "[x, [y]]"]) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.5:
            body = "[" + ", ".join(items) + "]"
        else:
            body = "{" + ", ".join(f"k{i}: {item}" for i, item in enumerate(items)) + "}"
        if rng.random() < 0.1:
            body = "{<<: " + (f"*a{rng.randint(0, count)}" if rng.random() < 0.5 else body) + "}"
        nest = rng.randint(0, 20)
        lines.append(f"  --a{index}: &a{index} " + "[" * nest + body + "]" * nest)
    return "\n".join(lines) + "\n"


def hostile_file(rng: random.Random) -> bytes:
    kind = rng.choice(["mutated", "mutated", "edited", "edited", "structure", "aliased", "text", "bytes", "utf16"])
    if kind == "bytes":
        return rng.randbytes(rng.randint(0, 200))
    if kind == "utf16":
        return mutated(rng).encode("utf-16", "surrogatepass")
    make = {
        "mutated": mutated,
        "edited": edited,
        "structure": structure,
        "aliased": aliased,
        "text": lambda r: random_text(r, 200),
    }[kind]
    return make(rng).encode("utf-8", "surrogatepass")


# One draw per example (a seeded Random), the rest plain Python: thousands of examples in seconds.
FILES = st.randoms(use_true_random=True).map(hostile_file)


class Hang(Exception):
    pass


def outcome(path: Path, data: bytes) -> str | None:
    """None when loading `data` gives a LoadedManifest or a well-formed ManifestError, else what went wrong."""
    path.unlink(missing_ok=True)  # a fresh file: truncating one with data makes ext4 flush it (tens of ms)
    path.write_bytes(data)

    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        result = load_manifest(path)
    except ManifestError as exc:
        return malformed(str(exc), path)
    except Hang:
        return "hang"
    except BaseException as exc:  # noqa: BLE001 - anything else is the failure being counted
        return f"{type(exc).__name__}: {exc}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return None if isinstance(result, LoadedManifest) else f"returned {type(result).__name__}"


def malformed(message: str, path: Path) -> str | None:
    """Each line: `FILE:LINE: field: message` (or `FILE: message` for the file itself), printable."""
    lines = message.split("\n")
    if message.splitlines() != lines:
        return f"a line break inside a line: {message!r}"[:300]
    shape = re.compile(rf"{re.escape(str(path))}(:\d+: [^\n]+?: [^\n]+|: [^\n]+)")
    for line in lines:
        if not line.isprintable() or not shape.fullmatch(line):
            return f"malformed line: {line!r}"[:300]
    return None


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "src").mkdir()
    (root / "src" / "train.py").write_text("print('hello')\n")
    return root / "tftrain.yml"


def test_the_valid_base_loads(project):
    assert outcome(project, VALID.encode()) is None
    assert isinstance(load_manifest(project), LoadedManifest)


def test_fuzz_the_loader(project, capsys):
    failures: list[tuple[str, str]] = []
    seen = {"examples": 0}

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,  # the per-example limit is HANG_SECONDS, enforced by an alarm
        suppress_health_check=list(HealthCheck),
    )
    @given(FILES)
    def check(data: bytes) -> None:
        seen["examples"] += 1
        problem = outcome(project, data)
        if problem is not None:
            failures.append((problem, data[:300]))

    started = time.monotonic()
    check()
    elapsed = time.monotonic() - started
    hangs = sum(1 for problem, _ in failures if problem == "hang")
    with capsys.disabled():
        print(
            f"\nfuzz: {seen['examples']} examples, {len(failures) - hangs} other exceptions or malformed errors,"
            f" {hangs} hangs, {elapsed:.1f} s"
        )
    assert not failures, failures[:5]
