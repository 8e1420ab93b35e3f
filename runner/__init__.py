"""tf-train-action's runner: `tftrain` trains TensorFlow models from a manifest.

Training scripts may `from runner import log_metric`; this module imports nothing heavy.
"""

from __future__ import annotations

from runner.api import log_metric

__version__ = "0.1.0"
__all__ = ["__version__", "log_metric"]
