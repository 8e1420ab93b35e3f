"""The replay at registration, its pure parts: which baseline, the candidate's version directory,
the requests read (and refused) before anything trains."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from runner.errors import ReplayError
from runner.history.model_registry import Registry
from runner.history.store import Store
from runner.manifest.replay import ReplaySpec
from runner.replay.promotion import GitHub, baseline_ref, candidate_version, check_requests, requests_of
from runner.replay.section import replay_markdown


class Quiet:
    def info(self, *args, **kwargs):
        self.said = args


def github(last: int | None = 3):
    return GitHub(lambda: (SimpleNamespace(), SimpleNamespace()), lambda name: last)


def register(home, name: str, times: int) -> None:
    model = home / "m.keras"
    model.write_bytes(b"model")
    with Store(home) as store:
        for _ in range(times):
            Registry(store).register(name, model, None, {})


def test_last_release_is_the_release_with_github_else_this_homes_last_version(tmp_path):
    spec = ReplaySpec(requests="r.jsonl")
    assert baseline_ref(spec, "m", github(), tmp_path) == "release:m@v3"
    assert baseline_ref(spec, "m", github(last=None), tmp_path) is None  # no release yet: the candidate alone
    assert baseline_ref(spec, "m", None, tmp_path) is None  # the first version: the candidate alone
    register(tmp_path, "m", 2)
    assert baseline_ref(spec, "m", None, tmp_path) == "m@v2"
    assert baseline_ref(ReplaySpec(requests="r.jsonl", against="m@v1"), "m", github(), tmp_path) == "m@v1"


def test_the_candidate_is_served_from_links_to_the_runs_model_and_copies_of_the_gates_files(tmp_path):
    model = tmp_path / "outputs" / "model"
    model.mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"pb")
    gate = tmp_path / "serving.json"
    gate.write_text("{}")
    with candidate_version(tmp_path / "run", model, {"serving/serving.json": gate}, "m", "2.18") as served:
        root = served.directory.root
        assert (root / "model" / "saved_model.pb").read_bytes() == b"pb"
        assert (root / "model" / "saved_model.pb").stat().st_ino == (
            model / "saved_model.pb"
        ).stat().st_ino  # linked, not copied
        assert (root / "serving" / "serving.json").read_text() == "{}"
        assert (served.name, served.framework_version, served.version) == ("m", "2.18", None)
    assert not root.exists() and model.is_dir()  # the scratch goes, the run's model stays


def test_requests_that_cannot_be_replayed_are_said_before_training_naming_the_field_file_and_line(tmp_path):
    (tmp_path / "r.jsonl").write_text('{"body": 1}\nnot json\n')
    with pytest.raises(ReplayError) as caught:
        check_requests(ReplaySpec(requests="r.jsonl"), tmp_path)
    assert str(caught.value).startswith("model.replay.requests: ") and "r.jsonl:2: not JSON" in str(caught.value)
    check_requests(ReplaySpec(requests="release:m-v1"), tmp_path)  # a release's are fetched at registration


def test_only_the_first_max_requests_are_replayed_and_that_is_said(tmp_path):
    (tmp_path / "r.jsonl").write_text("".join(f'{{"id": "r{i}", "body": {i}}}\n' for i in range(5)))
    logger = Quiet()
    requests, origin = requests_of(ReplaySpec(requests="r.jsonl", max_requests=3), tmp_path, github(), tmp_path, logger)
    assert [r.id for r in requests] == ["r0", "r1", "r2"] and origin == "r.jsonl"
    assert "the first 3 of 5 requests" in logger.said[0]


def test_no_report_no_section_and_a_bad_report_is_left_out(tmp_path):
    assert replay_markdown(tmp_path) == ""
    (tmp_path / "replay.json").write_text("[1, 2")
    assert replay_markdown(tmp_path) == ""
