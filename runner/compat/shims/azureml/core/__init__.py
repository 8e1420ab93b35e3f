"""tftrain's stand-in for azureml.core: Run works (runner.compat.run_context), and Model.get_model_path
(runner.compat.model_path) where a scoring script is served; the rest of the
SDK imports, and raises NotImplementedError when used. `azureml.core.run`, `.model`, … are
the same module under the names scripts import them by."""

import sys
import types

from runner.compat.model_path import Model
from runner.compat.run_context import Run, stub

__all__ = ["Model", "Run"]
SUBMODULES = ("run", "model", "workspace", "dataset", "datastore", "experiment", "environment", "script_run_config", "conda_dependencies")


def __getattr__(name: str):
    return stub(__name__, name)


def _submodule(name: str) -> types.ModuleType:
    module = types.ModuleType(f"{__name__}.{name}", __doc__)
    module.Run = Run
    module.Model = Model
    module.__getattr__ = lambda attribute: stub(module.__name__, attribute)
    return module


for _name in SUBMODULES:
    sys.modules[f"{__name__}.{_name}"] = globals()[_name] = _submodule(_name)
