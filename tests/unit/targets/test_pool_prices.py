"""Prices from the pool file (`cost:`) and the manifest (`compute.cost`): what a run's cost is worked out at."""

from __future__ import annotations

import pytest
from test_pool_placement import write

from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.manifest.cost import CostSpec
from runner.targets.base import Target
from runner.targets.pool.dispatch import PoolJob
from runner.targets.pool.inventory import load_pool
from runner.targets.pool.target import PoolTarget

HOSTS = "hosts:\n  - {name: gpu1, address: 10.0.0.1, gpus: 4}\n"


def test_the_pool_file_prices_the_runs_on_it(tmp_path):
    loaded = load_pool(write(tmp_path, HOSTS + "cost: {gpu_hour: 2.5, cpu_hour: 0.05, currency: EUR}\n"))
    job = PoolJob(base_image="python:3.11", pool=loaded, request=None)
    assert PoolTarget().prices(job) == CostSpec(gpu_hour=2.5, cpu_hour=0.05, currency="EUR")
    assert PoolTarget().prices(PoolJob(base_image="x", pool=load_pool(write(tmp_path, HOSTS)), request=None)) is None
    assert Target().prices(job) is None  # a target that knows no prices


@pytest.mark.parametrize(
    "cost, message",
    [
        ("{gpu_hour: -1}", "pool.yml:3: cost.gpu_hour: Input should be greater than or equal to 0"),
        ("{gpu_hour: .inf}", "pool.yml:3: cost.gpu_hour: Input should be a finite number"),
        ("{cpu_hour: 1, currency: usd}", "pool.yml:3: cost.currency: String should match pattern"),
        ("{gpu_hours: 1}", "pool.yml:3: cost.gpu_hours"),
    ],
)
def test_a_bad_price_in_the_pool_file_names_its_line(tmp_path, cost, message):
    with pytest.raises(ManifestError) as error:
        load_pool(write(tmp_path, HOSTS + f"cost: {cost}\n"))
    assert message in str(error.value)


def test_a_bad_price_in_the_manifest_names_its_line(tmp_path):
    path = tmp_path / "tftrain.yml"
    path.write_text("name: demo\nentry_script: train.py\ncompute:\n  cost: {gpu_hour: '2.5'}\n")
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    assert "tftrain.yml:4: compute.cost.gpu_hour" in str(error.value)
