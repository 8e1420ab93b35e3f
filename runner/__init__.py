"""tf-train-action's runner: `tftrain` trains TensorFlow models from a manifest.

Training scripts may `from runner import log_metric`; it is loaded when first asked for, so that
`import runner` (every tftrain command, `tftrain --version`) costs nothing.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "log_metric"]


def __getattr__(name: str):
    if name == "log_metric":
        from runner.api import log_metric

        return log_metric
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
