"""runner/compat/startup's sitecustomize, in a Python of its own with a small `keras` (and `tf_keras`)
of the test's on the path: Keras' CallbackList is what the layer wraps, nothing else of Keras."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import runner

pytestmark = pytest.mark.integration

LAYER = Path(runner.__file__).parent / "compat/startup"

FAKE_KERAS = """\
import os, signal


class CallbackList:
    def on_epoch_end(self, epoch, logs=None):  # a backup saved in two writes, a SIGTERM between them
        with open("weights", "w") as handle:
            handle.write(str(epoch))
        os.kill(os.getpid(), signal.SIGTERM)
        with open("metadata", "w") as handle:
            handle.write(str(epoch))

    def on_train_batch_end(self, batch, logs=None):
        os.kill(os.getpid(), signal.SIGTERM)
        return "batch " + str(batch)


class callbacks:
    CallbackList = CallbackList
"""

SCRIPT = """\
import os, signal, sys
{before}
import {module} as keras
print("returned", keras.callbacks.CallbackList().{hook}(1), flush=True)
print("after the callbacks", flush=True)
"""


def run(tmp_path: Path, variables: dict[str, str], hook: str = "on_epoch_end", before: str = "", module="keras"):
    (tmp_path / "fake").mkdir(exist_ok=True)
    (tmp_path / "fake" / f"{module}.py").write_text(FAKE_KERAS)
    (tmp_path / "script.py").write_text(SCRIPT.format(before=before, module=module, hook=hook))
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("TFTRAIN_")},
        "PYTHONPATH": f"{LAYER}:{tmp_path / 'fake'}",
        **variables,
    }
    return subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_sigterm_during_a_save_takes_effect_once_the_save_is_whole(tmp_path):
    result = run(tmp_path, {"TFTRAIN_SAVE_BEFORE_STOP": "1"})
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert (tmp_path / "weights").read_text() == (tmp_path / "metadata").read_text() == "1"
    assert "SIGTERM came while Keras' callbacks saved; it takes effect now" in result.stderr
    assert "returned" not in result.stdout


@pytest.mark.parametrize("variables", [{}, {"TFTRAIN_SAVE_BEFORE_STOP": "0"}, {"TFTRAIN_SEED": "3"}])
def test_without_the_variable_a_sigterm_ends_the_save_where_it_is(tmp_path, variables):
    result = run(tmp_path, variables)
    assert result.returncode == -signal.SIGTERM
    assert (tmp_path / "weights").exists() and not (tmp_path / "metadata").exists()  # what the layer prevents


def test_tf_keras_is_held_too_and_a_batch_end_keeps_its_answer(tmp_path):
    result = run(tmp_path, {"TFTRAIN_SAVE_BEFORE_STOP": "1"}, hook="on_train_batch_end", module="tf_keras")
    assert result.returncode == -signal.SIGTERM
    assert "it takes effect now" in result.stderr


def test_the_scripts_own_handler_gets_the_held_signal_and_stays_its_own(tmp_path):
    handler = (
        "signal.signal(signal.SIGTERM, lambda n, f: print('script handler', flush=True))\n"
        "import atexit; atexit.register(lambda: print('handler kept:', signal.getsignal(signal.SIGTERM).__name__))"
    )
    result = run(tmp_path, {"TFTRAIN_SAVE_BEFORE_STOP": "1"}, before=handler)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("script handler") < out.index("returned None") < out.index("after the callbacks")
    assert "handler kept: <lambda>" in out
    assert (tmp_path / "metadata").read_text() == "1"


def test_a_sigterm_outside_the_callbacks_is_untouched(tmp_path):
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "keras.py").write_text(FAKE_KERAS)
    script = "import keras, os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(5)\nprint('alive')\n"
    (tmp_path / "script.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": f"{LAYER}:{tmp_path / 'fake'}", "TFTRAIN_SAVE_BEFORE_STOP": "1"}
    result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == -signal.SIGTERM and "alive" not in result.stdout


def test_another_sitecustomize_on_the_path_still_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("print('the distribution sitecustomize', flush=True)\n")
    env = {**os.environ, "PYTHONPATH": f"{LAYER}:{other}", "TFTRAIN_SAVE_BEFORE_STOP": "1"}
    result = subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, text=True)
    assert result.stdout == "the distribution sitecustomize\n" and result.returncode == 0


def test_a_handler_a_callback_sets_while_it_saves_stays_and_gets_the_held_signal(tmp_path):
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "keras.py").write_text(
        FAKE_KERAS.replace(
            '        os.kill(os.getpid(), signal.SIGTERM)\n        with open("metadata"',
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        signal.signal(signal.SIGTERM, lambda n, f: print('callback handler', flush=True))\n"
            '        with open("metadata"',
        )
    )
    (tmp_path / "script.py").write_text(
        "import signal, keras\nkeras.callbacks.CallbackList().on_epoch_end(0)\n"
        "print('kept:', signal.getsignal(signal.SIGTERM).__name__, flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{LAYER}:{tmp_path / 'fake'}", "TFTRAIN_SAVE_BEFORE_STOP": "1"}
    result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "callback handler\nkept: <lambda>\n"
