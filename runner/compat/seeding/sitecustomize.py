"""tftrain's start-up layer for `evaluation:` seeds: on the training's PYTHONPATH (first) when the
manifest asks for several seeds and does not say `evaluation.set_seed: false`.

Before the script's first line, Python's `random` is seeded from TFTRAIN_SEED; NumPy, TensorFlow,
Keras 3 and tf-keras are seeded as each is imported (after its own import finishes: a script that
sets TF_USE_LEGACY_KERAS or TF_CPP_MIN_LOG_LEVEL before `import tensorflow` still gets its way,
and a script that imports none of them pays nothing). A script that seeds them itself seeds them
last. The standard library only: this runs in the training's own interpreter. Any other
sitecustomize on the path (a distribution's) runs after it, as it would have."""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _seeders(seed):
    def numpy(module):
        module.random.seed(seed)

    def tensorflow(module):
        module.random.set_seed(seed)

    def keras(module):  # Keras 3 (its global seed generator) and tf-keras
        module.utils.set_random_seed(seed)

    return {"numpy": numpy, "tensorflow": tensorflow, "keras": keras, "tf_keras": keras}


class _Seeding(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the modules it seeds, once each."""

    def __init__(self, seeders):
        self.seeders = seeders

    def find_spec(self, name, path, target=None):
        seeder = self.seeders.pop(name, None)
        if seeder is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module):
            execute(module)
            try:
                seeder(module)
            except Exception as exc:  # never the script's failure: it runs unseeded, and says so
                sys.stderr.write(f"tftrain: could not seed {name} from TFTRAIN_SEED: {type(exc).__name__}: {exc}\n")

        loader.exec_module = exec_module
        return spec


def _install():
    text = os.environ.get("TFTRAIN_SEED", "")
    if not text.isdigit() or len(text) > 9:
        return
    seed = int(text)
    import random

    random.seed(seed)
    sys.meta_path.insert(0, _Seeding(_seeders(seed)))


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
