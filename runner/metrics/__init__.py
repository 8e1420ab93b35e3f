"""Metrics: parsed from logs, appended by the script, read from TensorBoard; one series per run."""

from __future__ import annotations

from runner.metrics.point import MetricPoint

__all__ = ["MetricPoint"]
