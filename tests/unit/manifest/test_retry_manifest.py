"""`retry:` and `stop_grace_seconds`: their shapes, their one-line errors, and the grace a run gets."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest


def manifest_error(project, manifest: str) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifest(project(manifest=manifest))
    message = str(info.value)
    assert "\n" not in message.strip()
    return message


def test_defaults_and_a_bare_yaml_on_key(project):
    spec = load_manifest(project(manifest="retry: {}\n")).manifest.retry
    assert (spec.max_attempts, spec.on, spec.exit_codes) == (3, ["preempted", "lost"], [])
    # YAML 1.1 reads a bare `on` as true; quoted or not, it is the same key
    for text in ("retry:\n  on: [lost]\n  exit_codes: [75]\n", "retry:\n  'on': [lost]\n  exit_codes: [75]\n"):
        spec = load_manifest(project(manifest=text)).manifest.retry
        assert (spec.on, spec.exit_codes) == (["lost"], [75])
        assert spec.retries("lost") and not spec.retries("preempted")


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        pytest.param(
            "retry:\n  max_attempts: 0\n",
            ":5: retry.max_attempts: Input should be greater than or equal to 1",
            id="no-attempt",
        ),
        pytest.param(
            "retry:\n  max_attempts: 101\n",
            "retry.max_attempts: Input should be less than or equal to 100",
            id="too-many",
        ),
        # a bare `on` is YAML's true as the file is read: the line is retry's
        pytest.param(
            "retry:\n  on: [preempted, evicted]\n",
            ":4: retry.on: 'evicted' is not one of 'preempted' or 'lost'",
            id="unknown-cause",
        ),
        pytest.param(
            "retry:\n  'on': [evicted]\n", ":5: retry.on[0]: 'evicted' is not one of", id="unknown-cause-quoted"
        ),
        pytest.param("retry:\n  on: [lost, lost]\n", "retry.on: lost listed more than once", id="twice"),
        pytest.param(
            "retry:\n  exit_codes: [0]\n",
            "retry.exit_codes[0]: Input should be greater than or equal to 1",
            id="success-code",
        ),
        pytest.param("retry:\n  attempts: 3\n", "retry.attempts", id="unknown-key"),
        pytest.param(
            "stop_grace_seconds: 5\ncompute:\n  kill_grace_seconds: 3\n",
            ":4: stop_grace_seconds: compute.kill_grace_seconds is the same setting; keep only one of them",
            id="both-graces",
        ),
        pytest.param(
            "stop_grace_seconds: -1\n",
            "stop_grace_seconds: Input should be greater than or equal to 0",
            id="negative-grace",
        ),
    ],
)
def test_a_bad_retry_key_is_one_line(project, manifest, expected):
    assert expected in manifest_error(project, manifest)


@pytest.mark.parametrize(
    ("manifest", "grace"),
    [
        pytest.param("", 10.0, id="default-as-before"),
        pytest.param("retry: {}\n", 30.0, id="default-with-retry"),
        pytest.param("stop_grace_seconds: 120\n", 120.0, id="stop-grace"),
        pytest.param("compute:\n  kill_grace_seconds: 2\n", 2.0, id="kill-grace"),
        pytest.param("retry: {}\ncompute:\n  kill_grace_seconds: 2\n", 2.0, id="kill-grace-with-retry"),
    ],
)
def test_the_grace_a_stopped_training_gets(project, manifest, grace):
    assert load_manifest(project(manifest=manifest)).manifest.grace_seconds == grace


def test_a_stored_manifest_reads_back(project):
    """The history keeps the manifest as JSON (defaults included): reading it back must not find two graces."""
    from runner.manifest.model import Manifest

    manifest = load_manifest(project(manifest="stop_grace_seconds: 60\nretry: {'on': [lost]}\n")).manifest
    again = Manifest.model_validate_json(manifest.model_dump_json(by_alias=True))
    assert again == manifest and again.grace_seconds == 60.0
