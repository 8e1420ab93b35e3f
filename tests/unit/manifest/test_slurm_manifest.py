"""compute.slurm.time_limit: Slurm's --time forms, and the one-line errors against the manifest's own limits."""

from __future__ import annotations

import pytest

from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.manifest.slurm import time_limit_minutes

ON_SLURM = "compute:\n  target: slurm\n  slurm:\n    time_limit: {}\n"


def manifest_error(project, manifest: str) -> str:
    with pytest.raises(ManifestError) as info:
        load_manifest(project(manifest=manifest))
    message = str(info.value)
    assert "\n" not in message.strip()
    return message


@pytest.mark.parametrize(
    ("given", "minutes"),
    [(1, 1), ("90", 90), ("1:30", 2), ("2:00:00", 120), ("1-00", 1440), ("1-02:03", 1563), ("0-00:00:59", 1)],
)
def test_slurm_time_forms(given, minutes):
    assert time_limit_minutes(given) == minutes


def test_the_time_limit_of_a_manifest(project):
    spec = load_manifest(project(manifest=ON_SLURM.format("'0-01:00:00'"))).manifest.compute.slurm
    assert spec.time_limit_minutes == 60
    assert load_manifest(project(manifest="compute: {target: slurm}\n")).manifest.compute.slurm.time_limit is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "must be between 1 minute and 365 days"),
        ("'0:00'", "must be between 1 minute and 365 days"),
        ("[1]", "must be minutes or D-HH:MM:SS"),
        ("'1 hour'", "is not a Slurm time"),
        ("'1-'", "is not a Slurm time"),
        ("'1:2:3:4'", "is not a Slurm time"),
        ("'10\\n#SBATCH --x'", "is not a Slurm time"),
        ("true", "must be minutes or D-HH:MM:SS"),
        ("-5", "must be between 1 minute"),
        ("400-00", "must be between 1 minute and 365 days"),
    ],
)
def test_a_bad_time_limit_is_one_line(project, value, expected):
    message = manifest_error(project, ON_SLURM.format(value))
    assert "compute.slurm.time_limit" in message and expected in message, message


def test_the_time_limit_must_be_below_max_run_duration(project):
    message = manifest_error(project, "max_run_duration_seconds: 600\n" + ON_SLURM.format(10))
    assert ":8: compute.slurm.time_limit: 10 (10 min) is not below max_run_duration_seconds (600)" in message, message
    load_manifest(project(manifest="max_run_duration_seconds: 601\n" + ON_SLURM.format(10)))


def test_the_time_limit_must_outlast_the_stop_grace(project):
    message = manifest_error(project, "stop_grace_seconds: 60\n" + ON_SLURM.format(1))
    assert "compute.slurm.time_limit: 1 (1 min) leaves no time to train" in message, message


def test_billing_from_slurm(project):
    cost = load_manifest(project(manifest="compute: {target: slurm, cost: {from: slurm, billing_hour: 0.5}}\n"))
    assert (cost.manifest.compute.cost.source, cost.manifest.compute.cost.billing_hour) == ("slurm", 0.5)
    elsewhere = manifest_error(project, "compute: {cost: {from: slurm}}\n")
    assert (
        "compute.cost.from: slurm: only a target whose scheduler bills its jobs has billing units to price (compute.target: slurm)"
        in elsewhere
    )
    both = manifest_error(project, "compute: {target: slurm, cost: {from: slurm, gpu_hour: 2}}\n")
    assert "drop gpu_hour and cpu_hour" in both
    assert "compute.cost.from" in manifest_error(project, "compute: {target: slurm, cost: {from: sacct}}\n")
