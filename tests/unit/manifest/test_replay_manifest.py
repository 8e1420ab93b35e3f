"""`model.replay:` in the manifest: defaults, limits and rules, each one line naming the field."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest

SECTION = "model:\n  replay:\n    requests: replay/requests.jsonl\n"


@pytest.fixture
def replay_project(project):
    def make(extra: str = "", section: str = SECTION, requests: bool = True):
        path = project(manifest=section + extra)
        if requests:
            (path.parent / "src" / "replay").mkdir()
            (path.parent / "src" / "replay" / "requests.jsonl").write_text('{"body": {"instances": [[1]]}}\n')
        return path

    return make


def test_defaults_work_without_thought(replay_project):
    spec = load_manifest(replay_project()).manifest.model.replay
    assert (spec.min_agreement, spec.tolerance, spec.max_latency_ratio, spec.against) == (
        0.99,
        1e-3,
        1.5,
        "last-release",
    )
    assert (spec.max_requests, spec.concurrency, spec.warmup, spec.from_release) == (1000, 4, True, None)


def test_a_release_recording_and_a_version_as_baseline(project):
    spec = load_manifest(
        project(manifest="model:\n  replay:\n    requests: release:demo-v3\n    against: demo@v2\n")
    ).manifest.model.replay
    assert (spec.from_release, spec.against) == ("demo-v3", "demo@v2")


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ("    min_agreement: 1.5\n", "model.replay.min_agreement", "less than or equal to 1"),
        ("    min_agreement: .nan\n", "model.replay.min_agreement", "finite"),
        ("    tolerance: -1\n", "model.replay.tolerance", "greater than or equal to 0"),
        ("    max_latency_ratio: 0\n", "model.replay.max_latency_ratio", "greater than 0"),
        ("    against: yesterday\n", "model.replay.against", "give last-release, NAME@vN"),
        ("    against: demo@v0\n", "model.replay.against", "give last-release"),
        ("    concurrency: 65\n", "model.replay.concurrency", "less than or equal to 64"),
        ("    max_requests: 0\n", "model.replay.max_requests", "greater than or equal to 1"),
        ("    colour: red\n", "model.replay.colour", "unknown key"),
    ],
)
def test_bad_values_are_one_line_naming_the_field(replay_project, extra, field, words):
    with pytest.raises(ManifestError) as caught:
        load_manifest(replay_project(extra))
    assert field in str(caught.value) and words in str(caught.value)
    assert "\n" not in str(caught.value).strip()


@pytest.mark.parametrize(
    "section, words",
    [
        ("model:\n  replay:\n    requests: ../requests.jsonl\n", "relative path that stays inside"),
        ("model:\n  replay:\n    requests: 'release: '\n", "release: needs a tag"),
        (SECTION, "'replay/requests.jsonl' not found in source_directory"),
        ("model:\n  gate: 'off'\n  replay:\n    requests: x.jsonl\n", "needs model.register and model.gate not off"),
        ("model:\n  register: false\n  replay:\n    requests: x.jsonl\n", "needs model.register"),
    ],
)
def test_rules_across_fields(replay_project, section, words):
    with pytest.raises(ManifestError) as caught:
        load_manifest(replay_project(section=section, requests=False))
    assert "model.replay" in str(caught.value) and words in str(caught.value)


def test_requests_leading_out_through_a_link_are_refused(replay_project, tmp_path):
    path = replay_project(requests=False)
    (tmp_path / "outside.jsonl").write_text('{"body": 1}\n')
    (path.parent / "src" / "replay").mkdir()
    (path.parent / "src" / "replay" / "requests.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(ManifestError, match="leads outside"):
        load_manifest(path)
