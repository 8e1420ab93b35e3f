"""A target defined outside tftrain, as a plugin would be: this package registers its catalog row
from an entry point of the group `tftrain.targets` (tests/integration/targets/test_plugin_target.py
installs it as a distribution with that entry point). Nothing under runner/ names it."""

from runner.shared.catalog import TargetRow, register

ROW = TargetRow(
    "FakeTarget",
    containers=False,
    on_this_machine=False,  # its "cluster" trains: the run directory is the job's
    runner_label="fake-cluster",  # a GitHub runner that only submits to the fake cluster
    plan_file="fake-job.json",
    plan_file_caption="job (fake scheduler)",
    module="tftrain_fake_target.target",
)


def register_target() -> None:
    register("fake", ROW)
