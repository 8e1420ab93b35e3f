"""Which release of a model is the newest, and how model references read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.errors import NotFoundError
from runner.github.workflow import TagTemplate, baseline_metrics, releases_of
from runner.history.model_registry import parse_ref


@dataclass
class FakeAsset:
    name: str
    data: bytes

    def download_asset(self, path: str) -> None:
        Path(path).write_bytes(self.data)


@dataclass
class FakeRelease:
    tag_name: str
    draft: bool = False
    assets: list[FakeAsset] = field(default_factory=list)

    def get_assets(self) -> list[FakeAsset]:
        return self.assets


@dataclass
class FakeRepo:
    releases: list[FakeRelease]

    def get_releases(self) -> list[FakeRelease]:
        return self.releases


def metrics(tag: str) -> list[FakeAsset]:
    return [FakeAsset("metrics.json", json.dumps({"from": tag}).encode())]


def test_the_newest_release_is_the_highest_version_not_the_first_listed():
    repo = FakeRepo(
        [
            FakeRelease("demo-v2", assets=metrics("demo-v2")),
            FakeRelease("demo-v10", assets=metrics("demo-v10")),  # v10 > v2, though GitHub lists it second
            FakeRelease("demo-v11", draft=True, assets=metrics("demo-v11")),
            FakeRelease("other-v12", assets=metrics("other-v12")),
            FakeRelease("demo-v9"),
        ]
    )
    template = TagTemplate()
    assert [v for v, _ in releases_of(repo, "demo", template)] == [10, 9, 2]
    assert [v for v, _ in releases_of(repo, "demo", template, drafts=True)] == [11, 10, 9, 2]
    assert baseline_metrics(repo, "demo", template) == ("demo-v10", {"from": "demo-v10"})


def test_the_baseline_skips_releases_without_metrics_and_follows_the_tag_template():
    repo = FakeRepo(
        [FakeRelease("models/demo/v3"), FakeRelease("models/demo/v2", assets=metrics("v2")), FakeRelease("demo-v7")]
    )
    assert baseline_metrics(repo, "demo", TagTemplate("models/{name}/v{version}")) == ("models/demo/v2", {"from": "v2"})
    assert baseline_metrics(repo, "demo", TagTemplate()) is None  # demo-v7 has no metrics.json


@pytest.mark.parametrize(
    ("ref", "parsed"),
    [
        ("digits", ("digits", None)),
        ("digits@latest", ("digits", None)),
        ("digits@v12", ("digits", 12)),
        ("a.b-c_d@v1", ("a.b-c_d", 1)),
    ],
)
def test_model_references(ref, parsed):
    assert parse_ref(ref) == parsed


@pytest.mark.parametrize("ref", ["", "digits@12", "digits@v", "-digits", "digits@v1@v2", "di gits"])
def test_malformed_model_references(ref):
    with pytest.raises(NotFoundError, match="is not a model reference: use NAME, NAME@vN or NAME@latest"):
        parse_ref(ref)
