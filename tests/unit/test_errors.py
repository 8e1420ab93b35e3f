"""Errors: an optional part that is not installed is one line naming the pip extra."""

from __future__ import annotations

import importlib.abc
import json
import sys

import pytest

from runner.errors import MissingExtra, error_class, extra_module


def test_an_installed_module_is_returned_as_import_binds_it():
    assert extra_module("json.decoder", "s3", "S3 storage") is json


class _NotInstalled(importlib.abc.MetaPathFinder):
    """botocore as if `pip install tf-train-action` had left the s3 extra out."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "botocore":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_a_missing_extra_names_what_to_install(monkeypatch):
    for name in [name for name in sys.modules if name.partition(".")[0] == "botocore"]:
        monkeypatch.delitem(sys.modules, name)  # put back as they were after the test
    monkeypatch.setattr(sys, "meta_path", [_NotInstalled(), *sys.meta_path])
    with pytest.raises(MissingExtra) as raised:
        extra_module("botocore.exceptions", "s3", "inputs.data: an s3:// input")
    assert (
        str(raised.value)
        == "inputs.data: an s3:// input needs botocore: pip install 'tf-train-action[s3]' (in the action: extras: s3)"
    )
    assert raised.value.exit_code == 24 and error_class(24) is MissingExtra
