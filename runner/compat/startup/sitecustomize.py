"""tftrain's start-up layer: first on the training's PYTHONPATH where a run needs one of its two
parts, each off unless its variable says so. The standard library only: this runs in the
training's own interpreter. Any other sitecustomize on the path (a distribution's) runs after it,
as it would have.

TFTRAIN_SEED (an `evaluation:` with several seeds, unless `evaluation.set_seed: false`): before the
script's first line, Python's `random` is seeded; NumPy, TensorFlow, Keras 3 and tf-keras are
seeded as each is imported (after its own import finishes: a script that sets TF_USE_LEGACY_KERAS
or TF_CPP_MIN_LOG_LEVEL before `import tensorflow` still gets its way, and a script that imports
none of them pays nothing). A script that seeds them itself seeds them last.

TFTRAIN_SAVE_BEFORE_STOP=1 (a target that stops trainings to resume them: Slurm's time limit,
requeue and preemption): a SIGTERM that arrives while Keras runs its end-of-epoch or end-of-batch
callbacks (BackupAndRestore's backup, ModelCheckpoint's save) takes effect once they return, so a
stop never leaves a half-written backup to resume from. Outside them SIGTERM does what it did (ends
the process, or runs the script's own handler); a script that takes SIGTERM itself keeps it."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import sys
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
SAVING_HOOKS = ("on_epoch_end", "on_train_batch_end")  # where Keras' callbacks save


def _seeders(seed):
    def numpy(module):
        module.random.seed(seed)

    def tensorflow(module):
        module.random.set_seed(seed)

    def keras(module):  # Keras 3 (its global seed generator) and tf-keras
        module.utils.set_random_seed(seed)

    return {"numpy": numpy, "tensorflow": tensorflow, "keras": keras, "tf_keras": keras}


def _deferring_stop(method):
    """`method`, with a SIGTERM that comes while it runs held until it returns, then raised again."""

    def wrapped(self, *args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return method(self, *args, **kwargs)
        held = []
        previous = signal.getsignal(signal.SIGTERM)
        if previous is None:  # a handler set outside Python, which could not be put back
            return method(self, *args, **kwargs)

        def hold(number, frame):
            held.append(number)

        signal.signal(signal.SIGTERM, hold)
        try:
            return method(self, *args, **kwargs)
        finally:
            if signal.getsignal(signal.SIGTERM) is hold:  # a callback that set its own handler keeps it
                signal.signal(signal.SIGTERM, previous)
            if held:
                sys.stderr.write("tftrain: SIGTERM came while Keras' callbacks saved; it takes effect now\n")
                sys.stderr.flush()
                signal.raise_signal(signal.SIGTERM)

    wrapped.__wrapped__ = method
    return wrapped


def _save_before_stop(module):
    """Keras' CallbackList (Keras 3's or tf-keras', whichever `module` is) holds a SIGTERM while it saves."""
    callback_list = module.callbacks.CallbackList
    for name in SAVING_HOOKS:
        method = getattr(callback_list, name)
        if not hasattr(method, "__wrapped__"):
            setattr(callback_list, name, _deferring_stop(method))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: runs the hooks of a module once its own import finished, once each."""

    def __init__(self, hooks):
        self.hooks = hooks  # module name → functions of the module

    def find_spec(self, name, path, target=None):
        hooks = self.hooks.pop(name, None)
        if hooks is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            for hook in hooks:
                try:
                    hook(module)
                except Exception as exc:  # never the script's failure: it runs without, and says so
                    sys.stderr.write(f"tftrain: {hook.__name__} of {name}: {type(exc).__name__}: {exc}\n")

        loader.exec_module = exec_module
        return spec


def _install():
    hooks = {}
    text = os.environ.get("TFTRAIN_SEED", "")
    if text.isdigit() and len(text) <= 9:
        seed = int(text)
        import random

        random.seed(seed)
        for name, seeder in _seeders(seed).items():
            hooks.setdefault(name, []).append(seeder)
    if os.environ.get("TFTRAIN_SAVE_BEFORE_STOP") == "1":
        for name in ("keras", "tf_keras"):
            hooks.setdefault(name, []).append(_save_before_stop)
    if hooks:
        sys.meta_path.insert(0, _AfterImport(hooks))


def _next_sitecustomize():
    """The sitecustomize this one hides (later on the path), run as it would have been."""
    path = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.stderr.write(f"tftrain: {spec.origin}: {type(exc).__name__}: {exc}\n")


_install()
_next_sitecustomize()
