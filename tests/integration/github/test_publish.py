"""Publishing model versions to GitHub Releases (a server speaking GitHub's REST protocol),
through PyGithub: drafts, verified assets, 422 races, resumes, safe pulls."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import TFTRAIN

pytestmark = pytest.mark.integration


@pytest.fixture
def project(stand_in_project):
    return stand_in_project  # the models here are stand-ins: no gate


SCRIPT = """\
import os
for epoch, loss in ((1, 0.9), (2, 0.5), (3, 0.3)):
    print(f"Epoch {epoch}/3")
    print(f"4/4 - 0s - accuracy: {1 - loss:.2f} - loss: {loss}")
os.makedirs("outputs/model/variables", exist_ok=True)
open("outputs/model/saved_model.pb", "wb").write(b"graph" * 1000)
open("outputs/model/variables/data", "wb").write(os.urandom(4096))
"""
ASSETS = {
    "SHA256SUMS",
    "MODEL_CARD.md",
    "logs.tar.gz",
    "loss-curve.png",
    "manifest.lock.yml",
    "metrics.json",
    "metrics.jsonl",
    "model.tar.gz",
    "provenance.intoto.json",
    "usage.json",
}


def env_for(api, **extra):
    return {
        **os.environ,
        "GITHUB_REPOSITORY": "octo/models",
        "GITHUB_API_URL": api.url,
        "GITHUB_TOKEN": "ghs_test",
        **extra,
    }


def tftrain(*args, env):
    return subprocess.run([TFTRAIN, *args], capture_output=True, text=True, env=env, timeout=300)


def asset_bytes(api, release: dict, name: str) -> bytes:
    asset = next(a for a in release["assets"] if a["name"] == name)
    return api.assets[asset["id"]][1]


def test_publish_a_version_with_verified_assets(project, home, github_api, tmp_path):
    env = env_for(github_api)
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("publish", "--run", "demo-1", env=env)
    assert result.returncode == 0, result.stderr
    (release,) = github_api.releases
    assert release["tag_name"] == "demo-v1" and release["draft"] is False
    assert {a["name"] for a in release["assets"]} == ASSETS
    sums = dict(line.split()[::-1] for line in asset_bytes(github_api, release, "SHA256SUMS").decode().splitlines())
    for name in ASSETS - {"SHA256SUMS"}:
        assert hashlib.sha256(asset_bytes(github_api, release, name)).hexdigest() == sums[name], name
    assert release["body"].startswith("# demo v1") and "| **accuracy** |" in release["body"]
    with tarfile.open(fileobj=io.BytesIO(asset_bytes(github_api, release, "model.tar.gz"))) as archive:
        assert sorted(archive.getnames()) == ["saved_model.pb", "variables", "variables/data"]

    pulled = tftrain("models", "pull", "demo@latest", "--from", "github", "-o", str(tmp_path / "pulled"), env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "pulled" / "saved_model.pb").read_bytes() == b"graph" * 1000


def test_a_stopped_publish_resumes_its_draft(project, home, github_api):
    env = env_for(github_api)
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    github_api.fail_uploads = 100
    failed = tftrain("publish", env=env)
    assert failed.returncode == 17
    assert (
        "answered 502 Bad Gateway" in failed.stderr
        and "stays a draft" in failed.stderr
        and "tftrain publish --run demo-1" in failed.stderr
    )
    (release,) = github_api.releases
    assert release["draft"] is True
    github_api.fail_uploads = 2  # flaky for a moment more: retried with backoff
    resumed = tftrain("publish", "--run", "demo-1", env=env)
    assert resumed.returncode == 0, resumed.stderr
    (release,) = github_api.releases  # the same release, finished
    assert release["draft"] is False and {a["name"] for a in release["assets"]} == ASSETS


def test_concurrent_publishers_get_distinct_versions(project, home, github_api):
    env = env_for(github_api)
    path = project(script=SCRIPT)
    for _ in range(3):
        assert tftrain("run", "-f", str(path), env=env).returncode == 0
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda run: tftrain("publish", "--run", run, env=env), ["demo-1", "demo-2", "demo-3"]))
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    assert sorted(r["tag_name"] for r in github_api.releases) == ["demo-v1", "demo-v2", "demo-v3"]
    assert all({a["name"] for a in r["assets"]} == ASSETS and not r["draft"] for r in github_api.releases)


def test_a_dirty_checkout_is_not_published_unless_forced(project, home, github_api):
    env = env_for(github_api)
    path = project(script=SCRIPT)
    for command in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(command, cwd=path.parent, check=True)
    (path.parent / "src" / "train.py").write_text(SCRIPT + "# not committed\n")
    assert tftrain("run", "-f", str(path), env=env).returncode == 0
    refused = tftrain("publish", env=env)
    assert refused.returncode == 17 and "uncommitted changes" in refused.stderr
    assert github_api.releases == []
    assert tftrain("publish", "--force", env=env).returncode == 0


def test_pulling_refuses_archives_that_escape(home, github_api, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"owned"
        info = tarfile.TarInfo("../escaped.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    model = buffer.getvalue()
    sums = f"{hashlib.sha256(model).hexdigest()}  model.tar.gz\n".encode()
    github_api.add_release("octo", "models", "evil-v1", {"model.tar.gz": model, "SHA256SUMS": sums})
    target = tmp_path / "deep" / "out"
    result = tftrain("models", "pull", "evil@v1", "--from", "github", "-o", str(target), env=env_for(github_api))
    assert result.returncode == 6
    assert "refusing to extract '../escaped.txt': it leaves the target directory" in result.stderr
    assert not (tmp_path / "deep" / "escaped.txt").exists()


def test_tampered_downloads_are_refused(home, github_api, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("w")
        archive.addfile(info, io.BytesIO(b""))
    github_api.add_release(
        "octo", "models", "m-v1", {"model.tar.gz": buffer.getvalue(), "SHA256SUMS": b"0" * 64 + b"  model.tar.gz\n"}
    )
    result = tftrain("models", "pull", "m@v1", "--from", "github", "-o", str(tmp_path / "o"), env=env_for(github_api))
    assert result.returncode == 17 and "does not match its SHA256SUMS" in result.stderr


def test_large_models_go_to_s3(project, home, github_api, s3_server, aws_env, tmp_path):
    import boto3

    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket="models")
    env = env_for(github_api, INPUT_S3_BUCKET="models", INPUT_S3_PREFIX="team", INPUT_S3_ENDPOINT_URL=s3_server)
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("publish", env=env)
    assert result.returncode == 0, result.stderr
    (release,) = github_api.releases
    names = {a["name"] for a in release["assets"]}
    assert "model.s3.json" in names and "model.tar.gz" not in names
    pointer = json.loads(asset_bytes(github_api, release, "model.s3.json"))
    assert pointer["uri"] == "s3://models/team/demo/v1/model.tar.gz"
    head = boto3.client("s3", endpoint_url=s3_server).head_object(Bucket="models", Key="team/demo/v1/model.tar.gz")
    assert head["ContentLength"] == pointer["size"] and head["Metadata"]["sha256"] == pointer["sha256"]
    pulled = tftrain("models", "pull", "demo@v1", "--from", "github", "-o", str(tmp_path / "m"), env=env)
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "m" / "saved_model.pb").read_bytes() == b"graph" * 1000


def test_a_model_over_the_asset_limit_needs_a_bucket(project, home, github_api):
    env = env_for(github_api, TFTRAIN_S3_THRESHOLD_BYTES="100")
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("publish", env=env)
    assert result.returncode == 18
    assert "over GitHub's release asset limit: set s3-bucket" in result.stderr


def test_resume_from_a_released_model(project, home, github_api, tmp_path):
    env = env_for(github_api)
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0
    reader = "import os, sys\nprint('resumed', sorted(os.listdir(sys.argv[2])))\n"
    path = project(
        script=reader, manifest="resume_from: release:demo@latest\nscript_params:\n  --from: {resume_from: true}\n"
    )
    result = tftrain("run", "-f", str(path), env=env)
    assert result.returncode == 0, result.stderr
    assert "resumed ['saved_model.pb', 'variables']" in (home / "runs/demo-2/workdir/logs/0.log").read_text()
    missing = project(
        script=reader, manifest="resume_from: release:nothing@latest\nscript_params:\n  --from: {resume_from: true}\n"
    )
    failed = tftrain("run", "-f", str(missing), env=env)
    assert failed.returncode == 4 and "resume_from: no published release of nothing" in failed.stderr


@pytest.mark.parametrize(
    ("event", "ref", "payload", "pattern", "publishes"),
    [
        ("push", "refs/tags/v1.2", {}, "*", True),
        ("push", "refs/tags/nightly", {}, "v*", False),
        ("push", "refs/heads/main", {}, "*", False),
        ("release", "refs/tags/v2", {"action": "published"}, "*", True),
        ("pull_request", "refs/pull/7/merge", {}, "*", False),
    ],
)
def test_when_auto_publishes(project, home, github_api, tmp_path, event, ref, payload, pattern, publishes):
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(payload))
    env = env_for(
        github_api,
        GITHUB_EVENT_NAME=event,
        GITHUB_REF=ref,
        GITHUB_EVENT_PATH=str(event_file),
        INPUT_TAG_PATTERN=pattern,
    )
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("publish", "--when", "auto", env=env)
    assert result.returncode == 0, result.stderr
    assert bool(github_api.releases) is publishes, result.stdout


def test_a_tag_template_and_a_model_name(project, home, github_api, tmp_path):
    env = env_for(github_api, INPUT_TAG_TEMPLATE="models/{name}/v{version}")
    assert tftrain("run", "-f", str(project(script=SCRIPT)), "--model-name", "digits", env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0  # the same run again: the same release (idempotent)
    assert [r["tag_name"] for r in github_api.releases] == ["models/digits/v1"]
    assert tftrain("run", "-f", str(project(script=SCRIPT)), "--model-name", "digits", env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0  # a new run: the next version
    assert sorted(r["tag_name"] for r in github_api.releases) == ["models/digits/v1", "models/digits/v2"]
    lock = (home / "runs/digits-1/manifest.lock.yml").read_text()
    assert "packages:" in lock and "pydantic:" in lock  # what the training ran with
    bad = tftrain("run", "-f", str(project(script=SCRIPT)), "--model-name", "no spaces", env=env)
    assert bad.returncode == 3 and "--model-name 'no spaces'" in bad.stderr


def test_resume_from_a_release_named_by_the_tag_template(project, home, github_api, http_server):
    root, base_url = http_server
    (root / "labels.bin").write_bytes(b"labels" * 100)
    env = env_for(github_api, INPUT_TAG_TEMPLATE="models/{name}/v{version}")
    inputs = f"inputs:\n  labels:\n    source: {base_url}/labels.bin\n"
    assert tftrain("run", "-f", str(project(script=SCRIPT, manifest=inputs)), env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0
    (release,) = github_api.releases
    assert f"| labels | {base_url}/labels.bin | {hashlib.sha256(b'labels' * 100).hexdigest()} |" in release["body"]
    reader = "import os, sys\nprint('resumed', sorted(os.listdir(sys.argv[2])))\n"
    path = project(
        script=reader, manifest="resume_from: release:demo@latest\nscript_params:\n  --from: {resume_from: true}\n"
    )
    result = tftrain("run", "-f", str(path), env=env)
    assert result.returncode == 0, result.stderr
    assert "resumed ['saved_model.pb', 'variables']" in (home / "runs/demo-2/workdir/logs/0.log").read_text()


def one_error_line(result) -> str:
    """The single `tftrain: error:` line of a failed command (and no traceback)."""
    assert "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("tftrain: error:")]
    return line[len("tftrain: error: ") :]


@pytest.mark.parametrize(
    ("method", "path", "said"),
    [
        (
            "GET",
            "/repos/octo/models/releases",
            "GitHub: GET /repos/octo/models/releases answered 500 Internal Server Error",
        ),
        (
            "POST",
            "/repos/octo/models/releases",
            "creating the release demo-v1: GitHub: POST /repos/octo/models/releases answered 500 Internal Server Error",
        ),
        (
            "PATCH",
            "/repos/octo/models/releases/*",
            (
                "GitHub: PATCH /repos/octo/models/releases/1001 answered 500 Internal Server Error; "
                "the release demo-v1 stays a draft: run `tftrain publish --run demo-1` to finish it"
            ),
        ),
    ],
)
def test_a_publish_github_refuses_fails_with_one_line(project, home, github_api, method, path, said):
    env = env_for(github_api)
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    github_api.fail(method, path, 500)
    result = tftrain("publish", env=env)
    assert result.returncode == 17
    assert one_error_line(result) == said
    assert "ghs_test" not in result.stdout + result.stderr


def test_a_pull_github_refuses_fails_with_one_line(home, github_api, tmp_path):
    release = github_api.add_release(
        "octo", "models", "m-v1", {"model.tar.gz": b"x", "SHA256SUMS": b"0" * 64 + b"  model.tar.gz\n"}
    )
    asset = next(a for a in release["assets"] if a["name"] == "SHA256SUMS")
    github_api.fail("GET", f"/repos/octo/models/releases/assets/{asset['id']}", 404)
    result = tftrain("models", "pull", "m@v1", "--from", "github", "-o", str(tmp_path / "o"), env=env_for(github_api))
    assert result.returncode == 23
    assert (
        one_error_line(result) == f"GitHub: GET /repos/octo/models/releases/assets/{asset['id']} answered 404 Not Found"
    )


@pytest.fixture
def s3_proxy(s3_server):
    """moto's S3 behind a proxy that can answer chosen requests with an error."""
    from faulty_proxy import FaultyProxy

    with FaultyProxy(s3_server) as proxy:
        yield proxy


@pytest.mark.parametrize(
    ("bucket", "status", "code"), [("absent", 404, "NoSuchBucket"), ("flaky", 500, "InternalError")]
)
def test_a_publish_s3_refuses_fails_with_one_line(project, home, github_api, s3_proxy, aws_env, bucket, status, code):
    import boto3

    if bucket != "absent":
        boto3.client("s3", endpoint_url=s3_proxy.url).create_bucket(Bucket=bucket)
        s3_proxy.fail_s3("PUT", f"/{bucket}/team/demo/v1/model.tar.gz", status, code)
    env = env_for(
        github_api,
        INPUT_S3_BUCKET=bucket,
        INPUT_S3_PREFIX="team",
        INPUT_S3_ENDPOINT_URL=s3_proxy.url,
        AWS_MAX_ATTEMPTS="2",
    )
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    result = tftrain("publish", env=env)
    assert result.returncode == 18
    assert (
        one_error_line(result) == f"S3: PutObject s3://{bucket}/team/demo/v1/model.tar.gz answered {status} {code}; "
        "the release demo-v1 stays a draft: run `tftrain publish --run demo-1` to finish it"
    )
    assert "testing" not in result.stdout + result.stderr  # the AWS credentials


def test_a_pull_s3_refuses_fails_with_one_line(project, home, github_api, s3_proxy, aws_env, tmp_path):
    import boto3

    boto3.client("s3", endpoint_url=s3_proxy.url).create_bucket(Bucket="pulled")
    env = env_for(github_api, INPUT_S3_BUCKET="pulled", INPUT_S3_ENDPOINT_URL=s3_proxy.url, AWS_MAX_ATTEMPTS="2")
    assert tftrain("run", "-f", str(project(script=SCRIPT)), env=env).returncode == 0
    assert tftrain("publish", env=env).returncode == 0
    s3_proxy.fail_s3("GET", "/pulled/demo/v1/model.tar.gz", 503, "SlowDown")
    s3_proxy.fail_s3("HEAD", "/pulled/demo/v1/model.tar.gz", 503, "SlowDown")
    result = tftrain("models", "pull", "demo@v1", "--from", "github", "-o", str(tmp_path / "m"), env=env)
    assert result.returncode == 18
    assert one_error_line(result) == "S3: HeadObject s3://pulled/demo/v1/model.tar.gz answered 503 Service Unavailable"
    boto3.client("s3", endpoint_url=s3_proxy.url).delete_object(Bucket="pulled", Key="demo/v1/model.tar.gz")
    s3_proxy.failing.clear()
    gone = tftrain("models", "pull", "demo@v1", "--from", "github", "-o", str(tmp_path / "n"), env=env)
    assert gone.returncode == 18
    assert one_error_line(gone) == "S3: HeadObject s3://pulled/demo/v1/model.tar.gz answered 404 Not Found"
