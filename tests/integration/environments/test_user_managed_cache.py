"""The user_managed check on a real virtualenv: the first check imports TensorFlow, the next is
served from the cache, and a package installed into the virtualenv makes the next one import again."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from runner.environments import user_managed
from runner.errors import PreparingError

pytestmark = pytest.mark.integration


def tiny_wheel(folder: Path) -> Path:
    """A one-module wheel, made here: pip installs it with no index."""
    wheel = folder / "tiny-1.0-py3-none-any.whl"
    files = {
        "tiny.py": "VALUE = 1\n",
        "tiny-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
        "tiny-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(
            "tiny-1.0.dist-info/RECORD", "".join(f"{name},,\n" for name in [*files, "tiny-1.0.dist-info/RECORD"])
        )
    return wheel


@pytest.fixture
def imports(monkeypatch) -> list[str]:
    """Every TensorFlow import the check really starts (the interpreter it ran in)."""
    started: list[str] = []
    real = user_managed.import_in

    def counted(python: str) -> str:
        started.append(python)
        return real(python)

    monkeypatch.setattr(user_managed, "import_in", counted)
    return started


def test_a_pip_install_into_the_interpreter_checks_again(tmp_path, monkeypatch, imports):
    monkeypatch.setenv("TFTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # TensorFlow from this suite's environment, through a .pth file as pip's editable installs do
    (site / "suite.pth").write_text(sysconfig.get_path("purelib") + "\n")

    version = user_managed.check_interpreter(python)
    assert version.startswith("2.") and imports == [python]
    assert user_managed.check_interpreter(python) == version
    assert imports == [python]  # served from the cache

    pip = [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", str(tiny_wheel(tmp_path))], check=True, capture_output=True
    )
    assert user_managed.check_interpreter(python) == version
    assert imports == [python, python]
    assert user_managed.check_interpreter(python) == version
    assert imports == [python, python]

    subprocess.run([*pip, "uninstall", "-y", "tiny"], check=True, capture_output=True)
    assert user_managed.check_interpreter(python) == version
    assert len(imports) == 3

    (site / "suite.pth").unlink()  # TensorFlow gone from it: checked again, and the failure is one line
    with pytest.raises(PreparingError, match="cannot import tensorflow"):
        user_managed.check_interpreter(python)
    assert len(imports) == 4
