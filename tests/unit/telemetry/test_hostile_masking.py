"""Hostile corpus, masking: credentials nobody registered (a URL's password, a credential-named
query parameter, in any scheme) never leave tftrain, through any sink (console, GitHub commands,
step summary, step outputs, files masked in place, streams cut anywhere), and hostile lines cost
linear time. Also the CLI's refusals that quote such a URL: one line, the password as ***."""

from __future__ import annotations

import io
import time

import pytest
from hostile import assert_refused, files_containing, nothing_written_outside

from runner.errors import ManifestError, UsageError
from runner.settings import LoggerSettings
from runner.telemetry.logger import Logger
from runner.telemetry.masking import Masker, mask_credentials

PASSWORD = "hunter2-Zx9"

# (text holding PASSWORD, what it must read masked)
CREDENTIALS = [
    (f"postgresql://u@db.example/optuna?password={PASSWORD}", "postgresql://u@db.example/optuna?password=***"),
    (
        f"postgresql://u@db/x?sslmode=require&password={PASSWORD}&x=1",
        "postgresql://u@db/x?sslmode=require&password=***&x=1",
    ),
    (f"'mysql://me@db/x?PassWord={PASSWORD}' is not sqlite", "'mysql://me@db/x?PassWord=***' is not sqlite"),
    (f"mysql://me:{PASSWORD}@db/x", "mysql://me:***@db/x"),
    (f"redis://:{PASSWORD}@cache:6379/0", "redis://:***@cache:6379/0"),
    (f"https://user:p@ss/{PASSWORD}@registry.example/team/x", "https://user:***@registry.example/team/x"),
    (f"amqp://guest:{PASSWORD}@mq//vhost", "amqp://guest:***@mq//vhost"),
    (f"mongodb+srv://db/x?authSource=admin&pwd={PASSWORD}", "mongodb+srv://db/x?authSource=***&pwd=***"),
    (f"GET /predict?api_key={PASSWORD} HTTP/1.1", "GET /predict?api_key=*** HTTP/1.1"),
    (f"https://h/f?X-Amz-Signature={PASSWORD}&X-Amz-Expires=60", "https://h/f?X-Amz-Signature=***&X-Amz-Expires=60"),
    (f"https://acct.blob/c?sv=2020&sig={PASSWORD}", "https://acct.blob/c?sv=2020&sig=***"),
    (f"callback?next=https://h/x?access_token={PASSWORD}", "callback?next=https://h/x?access_token=***"),
    (f'{{"url": "s3://b/k?token={PASSWORD}"}}', '{"url": "s3://b/k?token=***"}'),
]

ORDINARY = [  # no credential: nothing changes
    "loss=0.25 acc=0.9 lr=0.001",
    "https://github.com/octo/models/releases?page=2&per_page=30",
    "--lr=0.1 --batch_size=32",
    "user@example.com wrote: a:b",
    "postgresql://u@db:5432/optuna",
]


@pytest.mark.parametrize(("text", "masked"), CREDENTIALS)
def test_credentials_are_masked_without_being_registered(text, masked):
    masker = Masker()
    assert masker.text(text) == masked
    assert masker.chunk(text.encode() + b"\n") == masked.encode() + b"\n"
    assert PASSWORD not in str(masker.data({"k": [text]}))


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_as_it_is(text):
    assert Masker().text(text) == text and mask_credentials(text) == text


def test_every_sink_of_the_logger_masks_them(tmp_path):
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    settings = LoggerSettings(actions=True, step_summary=summary, output=outputs)
    stream = io.StringIO()
    stream.buffer = io.BytesIO()
    logger = Logger(stream, settings=settings)
    url = CREDENTIALS[0][0]
    logger.info(f"storage {url}")
    logger.warning(f"tftrain.yml:3: could not reach {url}")
    logger.error(url)
    logger.table(url, [url], [[url]])
    logger.text(url)
    logger.annotate("error", url, file=url)
    logger.log_chunk(f"[0] {url}\n".encode(), "0.log")
    logger.step_summary(f"| {url} |")
    logger.outputs({"image": url})
    logger.flush()
    console = stream.buffer.getvalue()
    assert console.count(b"password=***") >= 8 and PASSWORD.encode() not in console
    assert files_containing(tmp_path, [PASSWORD.encode()]) == []
    assert "password=***" in summary.read_text() and "password=***" in outputs.read_text()


def test_a_file_masked_in_place_cut_anywhere(tmp_path, monkeypatch):
    import runner.telemetry.masking

    path = tmp_path / "0.jsonl"
    lines = [text for text, _ in CREDENTIALS]
    path.write_text("\n".join(lines) + "\n")
    for block in (3, 7, 64):  # every URL straddles some block boundary
        monkeypatch.setattr(runner.telemetry.masking, "BLOCK", block)
        Masker().mask_file(path)
        assert files_containing(tmp_path, [PASSWORD.encode()]) == [], block
        assert path.read_text() == "\n".join(masked for _, masked in CREDENTIALS) + "\n"
        path.write_text("\n".join(lines) + "\n")


def test_a_stream_cut_inside_a_url_keeps_it_whole():
    masker = Masker()
    data = f"connecting to mysql://me:{PASSWORD}@db/x".encode()
    for cut in range(len(b"connecting to "), len(data)):
        end = masker.safe_end(data[:cut])  # the rest has not arrived yet
        assert end <= len(b"connecting to "), cut
    assert PASSWORD.encode() not in masker.chunk(data)


HOSTILE_LINES = [
    "&" + "key" * 300_000,
    "a" * 1_000_000 + "://",
    "://a:" * 200_000,
    "://a:@" * 200_000,
    "?" + "a" * 1_000_000 + "=",
    ("&password=" + "x" * 50) * 20_000,
    "://" + "u" * 1_000_000 + ":" + "p" * 1_000_000,
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=range(len(HOSTILE_LINES)))
def test_a_hostile_line_costs_linear_time(line):
    masker = Masker(["registered-value"])
    started = time.monotonic()
    masker.text(line)
    masker.chunk(line.encode())
    # ~0.7 s here; a backtracking pattern takes hours on these (a bound, not a timing)
    assert time.monotonic() - started < 30.0


MANIFEST = """\
name: demo
source_directory: src
entry_script: train.py
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
        f"mysql://me@db/x?password={PASSWORD}",
        f"mysql://me:{PASSWORD}@db/x?sslpassword={PASSWORD}",
        f"oracle://db/x?token={PASSWORD}&a=b",
    ],
)
def test_a_refused_storage_url_never_shows_its_password(url, tmp_path, home, cli):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    manifest = tmp_path / "tftrain.yml"
    manifest.write_text(MANIFEST.format(url=url))
    with nothing_written_outside(tmp_path, home):
        for command in ("validate", "run", "plan"):
            result = cli(command, "-f", str(manifest))
            line = assert_refused(result, ManifestError, "sweep.storage", "***")
            assert PASSWORD not in result.stdout + result.stderr, line
    assert files_containing(tmp_path, [PASSWORD.encode()]) == [
        f"{manifest}: {PASSWORD.encode()[:12]!r}…"
    ]  # the user's own file only


@pytest.mark.parametrize(
    "image",
    [
        f"https://user:{PASSWORD}@registry.example/team/x",
        f"user:{PASSWORD}@registry.example/team/x",
        f"registry.example/x?token={PASSWORD}",
    ],
)
def test_an_image_with_credentials_is_refused_without_echoing_them(image, tmp_path, home, cli):
    with nothing_written_outside(tmp_path):
        for option in ("--image", "--base-image"):
            args = (
                ["--image", "registry.example/team/x", option, image]
                if option == "--base-image"
                else ["--image", image]
            )
            result = cli("deploy", "digits@v1", *args)
            assert_refused(result, UsageError, option, "***")
            assert PASSWORD not in result.stdout + result.stderr
    assert not home.exists()  # refused before the history was opened


def test_a_registered_password_quoted_into_a_url_is_still_masked():
    value = "p@ss:w/rd#1 x+y"  # $NAME of a storage URL, percent-encoded where it is put in
    masker = Masker([value])
    for form in ("p%40ss%3Aw%2Frd%231%20x%2By", "p%40ss%3Aw%2Frd%231+x%2By", value):
        assert masker.text(f"connect to db as {form} failed") == "connect to db as *** failed", form


# --- a secret that is not UTF-8 -----------------------------------------------------------------
# os.environ decodes bytes that are not UTF-8 as lone surrogates (surrogateescape); JSON's \ud800
# is a lone surrogate too: neither can be encoded as UTF-8, and the masker matches bytes as bytes.
RAW_SECRET = b"ab\xffcd-not-utf8-Secret"
ENVIRON_SECRET = RAW_SECRET.decode("utf-8", "surrogateescape")
LISTED_NAME = b"f\xe9.txt".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize("secret", [ENVIRON_SECRET, "x\ud800y-json-surrogate-Secret", f"line one\n{ENVIRON_SECRET}\n"])
def test_a_secret_that_is_not_utf8_is_masked_as_bytes(secret):
    masker = Masker([secret])
    line = secret.strip().splitlines()[-1]
    assert masker.text(f"got {line} here") == "got *** here"
    raw = line.encode("utf-8", "surrogateescape") if "\ud800" not in line else line.encode("utf-8", "surrogatepass")
    assert masker.chunk(b"got " + raw + b" here") == b"got *** here"
    assert masker.chunk(repr(raw).encode()) == b"b'***'"  # as Python prints the bytes: b'ab\xffcd…'
    stream = masker.safe_end(b"x " + raw[:5])  # a stream cut inside it holds it back
    assert stream <= 2


def test_the_logger_takes_a_secret_that_is_not_utf8(tmp_path):
    stream = io.StringIO()
    stream.buffer = io.BytesIO()
    logger = Logger(
        stream, settings=LoggerSettings(actions=True, step_summary=tmp_path / "summary.md", output=tmp_path / "out")
    )
    logger.mask_secrets(["API_SECRET"], {"API_SECRET": ENVIRON_SECRET})
    logger.info(f"value {ENVIRON_SECRET}")
    logger.warning(f"{ENVIRON_SECRET} and a file name {LISTED_NAME}")  # as os.listdir gives it: kept as its bytes
    logger.table("t", ["a"], [[ENVIRON_SECRET]])
    logger.log_chunk(b"[0] " + RAW_SECRET + b"\n", "0.log")
    logger.flush()
    console = stream.buffer.getvalue()
    mask_command = b"::add-mask::" + RAW_SECRET + b"\n"  # GitHub hides it in its log too
    assert console.startswith(mask_command)
    rest = console[len(mask_command) :]
    assert RAW_SECRET not in rest and b"value ***" in rest and b"f\xe9.txt" in rest and b"[0] ***" in rest
