"""The scoring server's start-up checks: a version directory that does not hold what serving.json
says is one line and exit 2, before any port is bound."""

from __future__ import annotations

import json

from runner.serving import supervision
from runner.serving.scoring import server


def version(tmp_path, scoring: dict, model: bool):
    (tmp_path / "serving").mkdir()
    (tmp_path / "serving" / "serving.json").write_text(json.dumps({"scoring": scoring}))
    (tmp_path / "scoring").mkdir()
    (tmp_path / "scoring" / "score.py").write_text("def init(): pass\ndef run(raw): return raw\n")
    if model:
        (tmp_path / "model").mkdir()
    return tmp_path


def test_a_registered_file_without_model_dir_is_one_line_before_binding(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(supervision, "supervised", lambda fd, grace, give_up=None: None)
    monkeypatch.setattr(supervision, "listen", lambda host, port: (_ for _ in ()).throw(AssertionError("bound a port")))
    monkeypatch.delenv("TFTRAIN_SERVING_TOKEN", raising=False)
    root = version(tmp_path, {"script": "score.py", "layout": "file"}, model=False)
    assert server.main(["--model-dir", str(root), "--name", "digits"]) == server.BAD_SETTING
    err = capsys.readouterr().err.strip()
    assert err.startswith("tftrain-serve: error: ") and "\n" not in err and "model" in err


def test_auth_without_a_key_is_refused_before_binding(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(supervision, "supervised", lambda fd, grace, give_up=None: None)
    monkeypatch.setattr(supervision, "listen", lambda host, port: (_ for _ in ()).throw(AssertionError("bound a port")))
    monkeypatch.delenv("TFTRAIN_SERVING_TOKEN", raising=False)
    root = version(tmp_path, {"script": "score.py", "auth": True}, model=True)
    assert server.main(["--model-dir", str(root), "--name", "digits"]) == server.BAD_SETTING
    assert "model.serving.auth: true" in capsys.readouterr().err
