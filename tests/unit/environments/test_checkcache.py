"""The user_managed check's answer, kept: the same interpreter and import path are served from the
cache; a changed site-packages, a replaced interpreter or a new PYTHONPATH import again; a failed
check is never kept; an entry that is damaged, a link, huge, or not ours is never believed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.environments import checkcache, user_managed
from runner.errors import PreparingError


class FakeInterpreter:
    """What user_managed's processes see: `python -c LAYOUT_PROBE` answers its import path, the
    TensorFlow probe answers `version` (or fails); `imports` counts the TensorFlow probes."""

    def __init__(self, root: Path) -> None:
        self.python = root / "env" / "bin" / "python"
        self.python.parent.mkdir(parents=True)
        self.python.write_text("#!/bin/false\n")
        self.python.chmod(0o755)
        self.site = root / "env" / "lib" / "site-packages"
        self.site.mkdir(parents=True)
        self.version, self.imports, self.layout_code = "2.18.1", 0, 0

    def run(self, argv, **kwargs):
        assert argv[0] == str(self.python) and argv[1] == "-c"
        if argv[2] == checkcache.LAYOUT_PROBE:
            said = [
                str(self.python),
                str(self.python.parent.parent),
                "3.11.2",
                "",
                "/usr/lib/python311.zip",
                str(self.site),
            ]
            return subprocess.CompletedProcess(argv, self.layout_code, b"\0".join(map(os.fsencode, said)))
        assert argv[2] == user_managed.PROBE
        self.imports += 1
        if self.version is None:
            return subprocess.CompletedProcess(
                argv, 1, "Traceback\nModuleNotFoundError: No module named 'tensorflow'\n"
            )
        return subprocess.CompletedProcess(argv, 0, f"a warning on import\n{self.version}\n")


@pytest.fixture
def fake(tmp_path, monkeypatch) -> FakeInterpreter:
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    interpreter = FakeInterpreter(tmp_path)
    monkeypatch.setattr(subprocess, "run", interpreter.run)
    return interpreter


def check(fake: FakeInterpreter) -> str:
    return user_managed.check_interpreter(str(fake.python))


def entry() -> Path:
    (found,) = checkcache.directory().glob("*.json")
    return found


def test_the_second_check_is_served_from_the_cache(fake):
    assert check(fake) == "2.18.1"
    assert check(fake) == "2.18.1"
    assert fake.imports == 1
    assert entry().stat().st_mode & 0o777 == 0o600
    assert list(checkcache.directory().iterdir()) == [entry()]  # no temporary file left behind


def test_a_package_installed_or_removed_imports_again(fake):
    check(fake)
    (fake.site / "tiny-1.0.dist-info").mkdir()  # what pip install does to site-packages
    fake.version = "2.19.0"
    assert check(fake) == "2.19.0" and fake.imports == 2
    check(fake)
    assert fake.imports == 2
    (fake.site / "tiny-1.0.dist-info").rmdir()  # pip uninstall
    check(fake)
    assert fake.imports == 3


def test_a_replaced_interpreter_imports_again(fake):
    check(fake)
    fake.python.unlink()
    fake.python.write_text("#!/bin/false\n# another build\n")
    fake.python.chmod(0o755)
    check(fake)
    assert fake.imports == 2


def test_a_pythonpath_imports_again(fake, monkeypatch, tmp_path):
    check(fake)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "more"))
    check(fake)
    check(fake)
    assert fake.imports == 2


def test_a_failed_check_is_never_kept(fake):
    fake.version = None
    for _ in range(2):
        with pytest.raises(PreparingError, match="cannot import tensorflow"):
            check(fake)
    assert fake.imports == 2
    assert not checkcache.directory().exists() or list(checkcache.directory().iterdir()) == []
    fake.version = "2.18.1"  # installed now: checked, then kept
    check(fake)
    check(fake)
    assert fake.imports == 3


def test_an_interpreter_that_cannot_describe_itself_is_checked_every_time(fake):
    fake.layout_code = 1
    check(fake)
    check(fake)
    assert fake.imports == 2
    assert not checkcache.directory().exists()


def _damaged(path: Path) -> None:
    path.write_text('{"format": 1, "key": "')


def _huge(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[:-2] + " " * checkcache.MAX_ENTRY_BYTES + "}\n")


def _other_key(path: Path) -> None:
    path.write_text(path.read_text().replace('"key": "', '"key": "0'))


def _bad_version(path: Path) -> None:
    path.write_text(path.read_text().replace("2.18.1", "2.18.1\\n\\u001b[2Jfake"))


def _link(path: Path) -> None:
    elsewhere = path.with_name("elsewhere")
    elsewhere.write_text(path.read_text())
    elsewhere.chmod(0o600)
    path.unlink()
    path.symlink_to(elsewhere)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _writable_by_others(path: Path) -> None:
    path.chmod(0o666)


@pytest.mark.parametrize(
    "spoil",
    [_damaged, _huge, _other_key, _bad_version, _link, _fifo, _writable_by_others],
    ids=lambda spoil: spoil.__name__[1:],
)
def test_an_entry_that_cannot_be_believed_imports_again_and_is_rewritten(fake, spoil):
    check(fake)
    path = entry()
    spoil(path)
    fake.version = "2.19.0"  # what the import says now, not what the spoiled entry says
    assert check(fake) == "2.19.0" and fake.imports == 2
    assert not path.is_symlink() and path.is_file()
    assert check(fake) == "2.19.0" and fake.imports == 2  # rewritten: served again


def test_an_entry_of_another_user_is_not_believed(fake, monkeypatch):
    check(fake)
    owner = os.geteuid()
    monkeypatch.setattr(checkcache.os, "geteuid", lambda: owner + 1)  # the entry's uid is no longer ours
    fake.version = "2.19.0"
    assert check(fake) == "2.19.0" and fake.imports == 2


def test_a_cache_that_cannot_be_written_costs_only_the_import(fake, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(blocker))
    assert check(fake) == "2.18.1"
    assert check(fake) == "2.18.1"
    assert fake.imports == 2


class FakeClient:
    """A daemon whose containers answer the import check (or fail it); `runs` counts them."""

    def __init__(self) -> None:
        import docker

        self.version: str | None = "2.18.1"
        self.runs = 0
        outer = self

        class Containers:
            def run(self, image, argv, **kwargs):
                outer.runs += 1
                if outer.version is None:
                    raise docker.errors.ContainerError(
                        image, 1, argv, image, b"ModuleNotFoundError: No module named 'tensorflow'\n"
                    )
                return f"{outer.version}\n".encode()

        self.containers = Containers()


IMAGE_ID = "sha256:" + "ab" * 32


def test_an_images_check_is_kept_under_its_content_addressed_id(tmp_path, monkeypatch):
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    client = FakeClient()
    for _ in range(2):
        assert user_managed.check_image_python(client, "team/tf:1", "python3", IMAGE_ID) == "2.18.1"
    assert client.runs == 1
    user_managed.check_image_python(client, "team/tf:1", "/opt/env/bin/python", IMAGE_ID)  # another interpreter in it
    user_managed.check_image_python(client, "team/tf:1", "python3", "sha256:" + "cd" * 32)  # the tag moved: other bytes
    assert client.runs == 3
    for not_an_id in (None, "sha256:feed", "team/tf:1", "sha256:" + "ab" * 32 + "/../x"):
        user_managed.check_image_python(client, "team/tf:1", "python3", not_an_id)
    assert client.runs == 7  # no content-addressed id: never kept


def test_an_images_failed_check_is_never_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    client = FakeClient()
    client.version = None
    for _ in range(2):
        with pytest.raises(PreparingError, match="python3 in image team/tf:1 cannot import tensorflow"):
            user_managed.check_image_python(client, "team/tf:1", "python3", IMAGE_ID)
    assert client.runs == 2
