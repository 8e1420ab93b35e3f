"""The composite action, run by a real GitHub Actions runner implementation (nektos/act,
self-hosted mode): installs tftrain from the action's directory and trains on a pull request."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import registries
from conftest import BASE_IMAGE

pytestmark = pytest.mark.integration
auth_registry = registries.auth_registry

ACT = str(Path(sys.executable).parent / "act")
SCRIPT = """\
print("Epoch 1/2")
print("4/4 - 0s - accuracy: 0.5 - loss: 0.9")
print("Epoch 2/2")
print("4/4 - 0s - accuracy: 0.75 - loss: 0.4")
import os
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/weights.txt", "w").write("w")
"""
WORKFLOW = """\
on: pull_request
jobs:
  train:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - id: tftrain
        uses: ./
        with:
          manifest: MANIFEST
      - run: echo "status=$STATUS run=$RUN_ID primary=$PRIMARY model=$MODEL"
        env:
          STATUS: ${{ steps.tftrain.outputs.status }}
          RUN_ID: ${{ steps.tftrain.outputs.run-id }}
          PRIMARY: ${{ steps.tftrain.outputs.primary-metric }}
          MODEL: ${{ steps.tftrain.outputs.model-version }}
"""


def pr_payload(head: str = "octo/models", labels: tuple[str, ...] = ()) -> dict:
    return {
        "number": 7,
        "pull_request": {
            "number": 7,
            "labels": [{"name": name} for name in labels],
            "head": {"ref": "feature", "repo": {"full_name": head}},
            "base": {"ref": "main", "repo": {"full_name": "octo/models"}},
        },
        "repository": {"full_name": "octo/models"},
    }


def action_repo(tmp_path: Path, repo: Path, manifest_input: str, payload: dict | None = None) -> Path:
    root = tmp_path / "repo"
    root.mkdir(parents=True)
    for name in ("action.yml", "pyproject.toml", "README.md", "tftrain.schema.json"):
        shutil.copy(repo / name, root / name)
    for name in ("runner", "templates"):
        shutil.copytree(repo / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "scripts").mkdir()
    shutil.copy(repo / "scripts" / "install-action", root / "scripts" / "install-action")
    (root / "demo").mkdir()
    (root / "demo" / "train.py").write_text(SCRIPT)
    (root / "demo" / "tftrain.yml").write_text("name: demo\nentry_script: train.py\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "pr.yml").write_text(WORKFLOW.replace("MANIFEST", manifest_input))
    (root / "event.json").write_text(json.dumps(payload or pr_payload()))
    for command in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(command, cwd=root, check=True)
    return root


@pytest.fixture(scope="module", autouse=True)
def tool_cache(tmp_path_factory):
    """One runner tool cache for the module, as on a real runner: the first job builds tftrain's
    virtualenv, the later ones reuse it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TFTRAIN_TEST_ACT_CACHE", str(tmp_path_factory.mktemp("act-cache")))
        yield


def act(
    root: Path,
    home: Path,
    api_url: str = "http://127.0.0.1:9",
    event: str = "pull_request",
    ref: str | None = None,
    token: str = "ghs_test",
    env: dict[str, str] | None = None,
    actor: str = "nektos/act",
):
    # Without PYTHONPATH: the steps run the tftrain the action installed, not this checkout's.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "TFTRAIN_HOME": str(home), **(env or {})}
    extra = ["--actor", actor, *(["--env", f"GITHUB_REF={ref}"] if ref else [])]
    extra += ["--action-cache-path", os.environ["TFTRAIN_TEST_ACT_CACHE"]]  # act's RUNNER_TOOL_CACHE: <it>/tool_cache
    return subprocess.run(
        [
            ACT,
            event,
            "-e",
            "event.json",
            "-P",
            "ubuntu-latest=-self-hosted",
            "--no-cache-server",
            *extra,
            "--env",
            f"GITHUB_API_URL={api_url}",
            "--env",
            "GITHUB_REPOSITORY=octo/models",
            "-s",
            f"GITHUB_TOKEN={token}",
        ],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def test_the_action_trains_on_a_pull_request(repo, tmp_path, github_api):
    root = action_repo(tmp_path, repo, "demo/tftrain.yml")
    result = act(root, tmp_path / "home", github_api.url)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    assert "status=Completed run=demo-1 primary=0.75 model=demo@v1" in result.stdout
    assert "::group::Running" in result.stdout  # workflow commands reach the runner
    assert (tmp_path / "home" / "runs" / "demo-1" / "summary.md").exists()
    (comment,) = github_api.comments.values()
    assert comment["issue"] == 7 and "demo-1: Completed" in comment["body"]

    again = act(root, tmp_path / "home", github_api.url)  # a second push to the pull request
    assert again.returncode == 0, again.stdout[-3000:]
    assert ": reused " in again.stdout  # tftrain's virtualenv, from the runner's tool cache
    (comment,) = github_api.comments.values()  # the same comment, updated
    assert "demo-2: Completed" in comment["body"]


def test_sign_keyless_reaches_tftrain_and_without_id_token_permission_says_so(repo, tmp_path, github_api):
    """Keyless signing cannot reach Sigstore here; what can run does: the input installs the signing
    extra, reaches the registration, which finds no OIDC token to ask for (act gives none, as GitHub
    gives none without `id-token: write`) and says what to add, in one line."""
    root = action_repo(tmp_path, repo, "demo/tftrain.yml")
    workflow = root / ".github" / "workflows" / "pr.yml"
    workflow.write_text(
        workflow.read_text().replace(
            "          manifest: demo/tftrain.yml\n",
            "          manifest: demo/tftrain.yml\n          sign-keyless: 'true'\n",
        )
    )
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "keyless"], cwd=root, check=True
    )
    result = act(root, tmp_path / "home", github_api.url)
    assert result.returncode != 0
    assert "keyless signing needs the job's OIDC token: give the job `permissions: id-token: write`" in result.stdout
    assert not (tmp_path / "home" / "models" / "demo" / "v1").exists()


def test_a_pushed_tag_publishes_the_model(repo, tmp_path, github_api):
    root = action_repo(
        tmp_path, repo, "demo/tftrain.yml", {"ref": "refs/tags/v1.0", "repository": {"full_name": "octo/models"}}
    )
    workflow = root / ".github" / "workflows" / "pr.yml"
    workflow.write_text(
        workflow.read_text()
        .replace("on: pull_request", "on: push")
        .replace('echo "status=$STATUS', 'echo "tag=$TAG url=$URL status=$STATUS')
        .replace(
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}",
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}\n          TAG: ${{"
            " steps.tftrain.outputs.release-tag }}\n          URL: ${{ steps.tftrain.outputs.release-url }}",
        )
    )
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "push"], cwd=root, check=True)
    result = act(root, tmp_path / "home", github_api.url, event="push", ref="refs/tags/v1.0")
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    (release,) = github_api.releases
    assert release["tag_name"] == "demo-v1" and not release["draft"]
    assert {"model.tar.gz", "SHA256SUMS", "MODEL_CARD.md", "metrics.json"} <= {a["name"] for a in release["assets"]}
    assert f"tag=demo-v1 url={release['html_url']} status=Completed" in result.stdout


def test_hostile_inputs_are_data_not_shell(repo, tmp_path):
    marker = Path("/tmp/tftrain-pwned-by-input")
    marker.unlink(missing_ok=True)
    root = action_repo(tmp_path, repo, "'$(touch /tmp/tftrain-pwned-by-input); x`touch /tmp/tftrain-pwned-by-input`'")
    result = act(root, tmp_path / "home")
    assert result.returncode != 0
    assert "manifest not found" in result.stdout + result.stderr
    assert not marker.exists()


def test_a_fork_is_refused_until_labelled(repo, tmp_path, github_api):
    root = action_repo(tmp_path, repo, "demo/tftrain.yml", pr_payload(head="someone/fork"))
    refused = act(root, tmp_path / "home", github_api.url)
    assert refused.returncode != 0
    assert "refusing to train pull request #7 from the fork someone/fork" in refused.stdout + refused.stderr
    assert not (tmp_path / "home" / "runs").exists()  # nothing of the fork ran
    (root / "event.json").write_text(json.dumps(pr_payload(head="someone/fork", labels=("safe-to-train",))))
    allowed = act(root, tmp_path / "home", github_api.url)
    assert allowed.returncode == 0, allowed.stdout[-3000:]
    assert (tmp_path / "home" / "runs" / "demo-1").exists()


def test_plan_only_gives_the_runner_labels(repo, tmp_path, github_api):
    root = action_repo(tmp_path, repo, "demo/tftrain.yml")
    (root / "demo" / "tftrain.yml").write_text(
        "name: demo\nentry_script: train.py\nuse_gpu: true\ncompute:\n  runner_labels: [a100]\n"
    )
    workflow = root / ".github" / "workflows" / "pr.yml"
    workflow.write_text(
        "on: pull_request\njobs:\n  plan:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n "
        "     - id: plan\n        uses: ./\n        with:\n          manifest: demo/tftrain.yml\n          plan-only:"
        " 'true'\n      - run: echo \"labels=$LABELS\"\n        env:\n          LABELS: ${{ steps.plan.outputs.runs-on"
        " }}\n"
    )
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "plan"], cwd=root, check=True)
    result = act(root, tmp_path / "home", github_api.url)
    assert result.returncode == 0, result.stdout[-4000:]
    assert 'labels=["self-hosted", "linux", "gpu", "a100"]' in result.stdout
    assert not (tmp_path / "home" / "runs").exists()  # planning trains nothing (and needs no GPU)


def test_the_workflows_we_ship_are_well_formed(repo):
    import yaml

    reusable = yaml.safe_load((repo / ".github" / "workflows" / "train.yml").read_text())
    triggers = reusable[True]  # YAML 1.1 reads the key `on` as true
    assert "workflow_call" in triggers
    assert reusable["jobs"]["train"]["needs"] == "plan"
    assert reusable["jobs"]["train"]["runs-on"] == "${{ fromJSON(needs.plan.outputs.runs-on) }}"
    action = yaml.safe_load((repo / "action.yml").read_text())
    for step in action["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), f"an expression in a script: {step['name']}"
    for path in (repo / "examples" / "workflows").glob("*.yml"):
        document = yaml.safe_load(path.read_text())
        assert document["jobs"], path


def test_two_tag_pushes_at_once_publish_two_versions(repo, tmp_path, github_api):
    from concurrent.futures import ThreadPoolExecutor

    roots = []
    for index in range(2):
        root = action_repo(
            tmp_path / f"r{index}",
            repo,
            "demo/tftrain.yml",
            {"ref": f"refs/tags/v{index}", "repository": {"full_name": "octo/models"}},
        )
        workflow = root / ".github" / "workflows" / "pr.yml"
        workflow.write_text(workflow.read_text().replace("on: pull_request", "on: push"))
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "push"], cwd=root, check=True
        )
        roots.append(root)
    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(
                lambda i: act(roots[i], tmp_path / f"home{i}", github_api.url, event="push", ref=f"refs/tags/v{i}"),
                range(2),
            )
        )
    assert [r.returncode for r in results] == [0, 0], [r.stdout[-2000:] for r in results]
    assert sorted(r["tag_name"] for r in github_api.releases) == ["demo-v1", "demo-v2"]
    for release in github_api.releases:
        assert not release["draft"] and len({a["name"] for a in release["assets"]}) == len(release["assets"]) >= 7


KERAS_SCRIPT = """\
import keras
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, activation="softmax")])
model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
print("Epoch 1/1")
print("1/1 - 0s - accuracy: 0.5 - loss: 1.2")
model.export("outputs/model")
"""


def test_deploy_image_pushes_the_served_model_with_the_job_token(repo, tmp_path, docker_client, auth_registry):
    """A tag push with deploy-image: trained, gated, published, then the serving image is built,
    smoke-tested and pushed to a registry that accepts only the job's token (as ghcr.io does), the
    release links it by digest, and the runner is logged out again."""
    from github_api import GitHubAPI

    root = action_repo(
        tmp_path, repo, "demo/tftrain.yml", {"ref": "refs/tags/v2.0", "repository": {"full_name": "octo/models"}}
    )
    (root / "demo" / "train.py").write_text(KERAS_SCRIPT)
    (root / "demo" / "tftrain.yml").write_text(
        f"name: digits\nentry_script: train.py\nuser_managed: true\npython: {sys.executable}\n"
    )
    repository = f"{auth_registry.address}/octo/digits"
    workflow = root / ".github" / "workflows" / "pr.yml"
    workflow.write_text(
        workflow.read_text()
        .replace("on: pull_request", "on: push")
        .replace(
            "          manifest: demo/tftrain.yml\n",
            f"          manifest: demo/tftrain.yml\n          deploy-image: {repository}\n          deploy-base-image:"
            f" {BASE_IMAGE}\n",
        )
        .replace('echo "status=$STATUS', 'echo "image=$IMAGE digest=$DIGEST status=$STATUS')
        .replace(
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}",
            "          MODEL: ${{ steps.tftrain.outputs.model-version }}\n          IMAGE: ${{"
            " steps.tftrain.outputs.image }}\n          DIGEST: ${{ steps.tftrain.outputs.image-digest }}",
        )
    )
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "deploy"], cwd=root, check=True
    )
    docker_config = tmp_path / "docker-config"
    with GitHubAPI(token=auth_registry.password) as github:
        result = act(
            root,
            tmp_path / "home",
            github.url,
            event="push",
            ref="refs/tags/v2.0",
            token=auth_registry.password,
            env={"DOCKER_CONFIG": str(docker_config)},
            actor=auth_registry.username,
        )
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        (release,) = github.releases
    digest = re.search(r"digest=(sha256:[0-9a-f]{64}) status=Completed", result.stdout)
    assert digest, result.stdout[-4000:]
    assert f"image={repository}@{digest[1]} " in result.stdout
    assert release["tag_name"] == "digits-v1" and f"`{repository}@{digest[1]}`" in release["body"]
    assert registry_digest(auth_registry, "octo/digits", "digits-v1") == digest[1]
    assert auth_registry.address not in (docker_config / "config.json").read_text()  # logged out after the step


def registry_digest(registry, name: str, tag: str) -> str:
    import base64
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(registries.CERTS_D / registry.address / "ca.crt"))
    request = urllib.request.Request(
        f"https://{registry.address}/v2/{name}/manifests/{tag}",
        method="HEAD",
        headers={
            "Accept": (
                "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
            ),
            "Authorization": "Basic " + base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode(),
        },
    )
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        return response.headers["Docker-Content-Digest"]
