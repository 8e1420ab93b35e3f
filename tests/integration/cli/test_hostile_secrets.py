"""Hostile corpus, secrets through real processes: a script that prints URLs with credentials nobody
registered and names an output file after a registered secret; a sweep storage URL with its
password in the query string. No password in any output of any command, nor in any stored file."""

from __future__ import annotations

import pytest
from hostile import assert_clean, assert_refused, files_containing, nothing_written_outside

from runner.errors import StorageError

pytestmark = pytest.mark.integration

REGISTERED = "reg1stered-Secret-77"  # in secrets: (masked as a value)
UNREGISTERED = "dsn-Pass-4411"  # only in URLs the script prints (masked by pattern)

SCRIPT = """\
import os, sys
password = os.environ["DSN_PASS"]
os.makedirs("outputs", exist_ok=True)
open(f"outputs/dump-{os.environ['API_SECRET']}.txt", "w").write("x")
print(f"connecting to postgresql://trainer@db.example/optuna?sslmode=require&password={password}")
print(f"pulling https://bot:{password}@registry.example/v2/x and s3://b/k?X-Amz-Signature={password}", file=sys.stderr)
"""


def test_a_run_never_shows_nor_stores_a_credential(project, cli, home, monkeypatch, tmp_path):
    monkeypatch.setenv("API_SECRET", REGISTERED)
    monkeypatch.setenv("DSN_PASS", UNREGISTERED)
    manifest = project(script=SCRIPT, manifest='secrets: [API_SECRET]\nmodel: {gate: "off"}\n')
    with nothing_written_outside(tmp_path, home, manifest.parent):
        ran = cli("run", "-f", str(manifest), timeout=120)
        assert_clean(ran)
        assert "password=***" in ran.stdout and "bot:***@registry.example" in ran.stdout + ran.stderr
        shown = [
            cli(*args, timeout=60)
            for args in (
                ["runs"],
                ["runs", "show", "demo-1"],
                ["runs", "show", "demo-1", "--markdown"],
                ["logs", "demo-1"],
            )
        ]
    for result in shown:
        assert_clean(result)
    assert "dump-***.txt" in shown[1].stdout  # the file's name, masked
    every = "".join(result.stdout + result.stderr for result in [ran, *shown])
    assert REGISTERED not in every and UNREGISTERED not in every
    assert files_containing(home, [REGISTERED.encode(), UNREGISTERED.encode()]) == []


SWEEP = """\
metrics: {{primary: val_loss}}
sweep:
  sampling_algorithm: grid
  storage: '{url}'
  search_space:
    --lr: {{type: choice, values: [0.1, 0.01]}}
"""


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://trainer@127.0.0.1:1/optuna?password={UNREGISTERED}&connect_timeout=3",
        f"postgresql://trainer:{UNREGISTERED}@127.0.0.1:1/optuna?sslpassword={UNREGISTERED}",
    ],
)
def test_an_unreachable_storage_never_shows_its_password(url, project, cli, home, tmp_path):
    manifest = project(manifest=SWEEP.format(url=url))
    with nothing_written_outside(tmp_path, home):
        result = cli("run", "-f", str(manifest), timeout=120)
    assert_refused(result, StorageError, "sweep storage", "127.0.0.1:1")
    assert UNREGISTERED not in result.stdout + result.stderr
    assert files_containing(home, [UNREGISTERED.encode()]) == []


NOT_UTF8 = b"ab\xffcd-not-utf8-Secret"  # the bytes of an environment variable that is not UTF-8


def test_a_secret_that_is_not_utf8_is_masked_as_its_bytes(project, home, tmp_path):
    """os.environ holds it with a lone surrogate (surrogateescape): every command masks it as the
    bytes it is, in the console, the logs and the records, and nothing crashes."""
    import os
    import subprocess

    from conftest import TFTRAIN

    script = (
        "import os, sys\nsys.stdout.buffer.write(b'got ' + os.environb[b'API_SECRET'] +"
        " b'\\n')\nprint(os.environb[b'API_SECRET'])\n"
    )
    manifest = project(script=script, manifest='secrets: [API_SECRET]\nmodel: {gate: "off"}\n')
    env = {**os.environb, b"API_SECRET": NOT_UTF8, b"GITHUB_ACTIONS": b"true", b"COLUMNS": b"200"}
    with nothing_written_outside(tmp_path, home, manifest.parent):
        results = [
            subprocess.run([TFTRAIN, *args, "-f", str(manifest)], capture_output=True, env=env, timeout=120)
            for args in (["validate"], ["plan"], ["run"])
        ]
    for result in results:
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr[-2000:]
    ran = results[2].stdout + results[2].stderr
    assert b"got ***" in ran and b"b'***'" in ran
    assert ran.count(NOT_UTF8) == 1 and b"::add-mask::" + NOT_UTF8 in ran  # only where GitHub is told to hide it
    assert b"API_SECRET='***'" in results[1].stdout
    assert files_containing(home, [NOT_UTF8, repr(NOT_UTF8)[2:-1].encode()]) == []
