"""The pool's pure parts: placement rules, leases, the pool file."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from builders import hosts, leases_at

from runner.errors import ManifestError
from runner.manifest import load_manifest
from runner.targets.pool.inventory import load_pool
from runner.targets.pool.jobs import capacities, request_for
from runner.targets.pool.schedule import Capacity, Demand, Request, never_fits, place


def test_mpi_nodes_take_one_gpu_per_rank_on_distinct_hosts():
    request = Request((Demand("node 0", gpus=2), Demand("node 1", gpus=2)), distinct_hosts=True)
    placement = place(request, hosts(("a", 4, 8), ("b", 2, 8), ("c", 8, 8)))
    assert placement.placed
    # best fit: b (exactly 2 free) first, then a (4) before c (8)
    assert [(item.host, item.gpu_ids) for item in placement.assignments] == [("b", (0, 1)), ("a", (0, 1))]


def test_held_gpus_are_never_given_again():
    busy = Capacity("a", 4, 8, used_gpus=frozenset({0, 2}))
    placement = place(Request((Demand("node 0", gpus=2),)), [busy])
    assert placement.assignments[0].gpu_ids == (1, 3)
    assert not place(Request((Demand("node 0", gpus=3),)), [busy]).placed


def test_parameter_servers_go_where_no_gpu_is_free():
    request = Request((Demand("worker 0", gpus=1), Demand("ps 0", cpus=1)))
    placement = place(request, hosts(("gpu", 1, 4), ("cpu-only", 0, 4)))
    assert placement.host_of("worker 0") == "gpu" and placement.host_of("ps 0") == "cpu-only"


def test_hosts_labels_and_gpu_type_constrain():
    pool = [
        Capacity("a", 4, 8, labels=frozenset({"nvme"}), gpu_type="v100"),
        Capacity("b", 4, 8, labels=frozenset({"nvme"}), gpu_type="a100"),
        Capacity("c", 4, 8, gpu_type="a100"),
    ]
    demand = (Demand("main 0", gpus=1),)
    assert place(Request(demand, labels=frozenset({"nvme"}), gpu_type="a100"), pool).host_of("main 0") == "b"
    assert place(Request(demand, hosts=frozenset({"c"})), pool).host_of("main 0") == "c"
    reason = place(Request(demand, gpu_type="h100"), pool).reason
    assert reason == "no pool host matches compute.gpu_type 'h100'"


def test_a_job_bigger_than_the_pool_never_fits_and_a_busy_pool_says_why():
    request = Request(tuple(Demand(f"node {i}", gpus=2) for i in range(3)), distinct_hosts=True)
    pool = hosts(("a", 4, 8), ("b", 4, 8))
    assert never_fits(request, pool) == "its 3 nodes need a host each and 2 pool hosts are eligible"
    wide = Request((Demand("node 0", gpus=6),), distinct_hosts=True)
    assert never_fits(wide, pool) == "the job needs 6 GPUs and the pool's eligible hosts have 8" or never_fits(
        wide, pool
    ).startswith("node 0 needs 6 free GPUs")
    small = Request((Demand("main 0", gpus=9),))
    assert never_fits(small, pool) == "the job needs 9 GPUs and the pool's eligible hosts have 8"
    busy = [Capacity("a", 4, 8, used_gpus=frozenset(range(4)))]
    assert never_fits(Request((Demand("main 0", gpus=1),)), busy) is None  # it fits once a's jobs end
    assert "main 0 needs 1 free GPUs" in place(Request((Demand("main 0", gpus=1),)), busy).reason


def test_manifest_demands(project):
    manifest = load_manifest(
        project(
            manifest=textwrap.dedent("""\
        use_gpu: true
        node_count: 2
        distributed_training: {backend: mpi, process_count_per_node: 4}
        compute: {target: pool, hosts: [a, b], host_labels: [ib], gpu_type: a100}
        custom_docker_image: img
        """)
        )
    ).manifest
    request = request_for(manifest)
    assert request.demands == (Demand("node 0", gpus=4), Demand("node 1", gpus=4))
    assert (
        request.distinct_hosts
        and request.hosts == {"a", "b"}
        and request.labels == {"ib"}
        and request.gpu_type == "a100"
    )
    ps = load_manifest(
        project(
            manifest=(
                "distributed_training: {backend: parameter_server, worker_count: 2, parameter_server_count:"
                " 1}\ncompute: {target: pool}\ncustom_docker_image: img\n"
            )
        )
    ).manifest
    assert [(d.key, d.gpus, d.cpus) for d in request_for(ps).demands] == [
        ("chief 0", 0, 1),
        ("worker 0", 0, 1),
        ("worker 1", 0, 1),
        ("ps 0", 0, 1),
    ]


def test_leases_keep_two_jobs_off_the_same_gpus(tmp_path):
    pool = hosts(("a", 2, 4))
    request = Request((Demand("main 0", gpus=2),))
    one, two = leases_at(tmp_path), leases_at(tmp_path)
    first = one.try_place("job-1", pool, lambda held: place(request, held))
    second = two.try_place("job-2", pool, lambda held: place(request, held))
    assert first.placement.placed and not second.placement.placed and second.position == 1
    third = two.try_place("job-3", pool, lambda held: place(request, held))
    assert third.position == 2  # behind job-2
    one.release("job-1")
    assert two.try_place("job-2", pool, lambda held: place(request, held)).placement.placed
    assert two.holders() == {"a": [("job-2", 0, 0), ("job-2", 1, 0)]}


def test_unrenewed_leases_expire_after_the_ttl(tmp_path):
    pool = hosts(("a", 1, 1))
    request = Request((Demand("main 0", gpus=1),))
    leases = leases_at(tmp_path, ttl=0.2)
    assert leases.try_place("job-1", pool, lambda held: place(request, held)).placement.placed
    assert not leases.try_place("job-2", pool, lambda held: place(request, held)).placement.placed
    time.sleep(0.3)
    assert leases.try_place("job-2", pool, lambda held: place(request, held)).placement.placed


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pool.yml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_pool_file_loads_with_defaults(tmp_path):
    pool = load_pool(
        write(
            tmp_path,
            """\
        hosts:
          - {name: gpu1, address: 10.0.0.1, gpus: 4, gpu_type: a100, cpu_slots: 16, labels: [nvme]}
          - {name: gpu2, address: 10.0.0.2, ssh_user: ubuntu, ssh_port: 2222}
        """,
        )
    ).pool
    assert pool.hosts[0].docker_endpoint == "ssh://root@10.0.0.1:22"
    assert pool.hosts[1].docker_endpoint == "ssh://ubuntu@10.0.0.2:2222"
    assert [c.gpus for c in capacities(pool)] == [4, 0]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "hosts:\n  - name: a\n    address: h\n    ssh_key: |\n      -----BEGIN OPENSSH PRIVATE KEY-----\n",
            "pool.yml:4: hosts[0].ssh_key: keys and passwords never go in the pool file",
        ),
        (
            "hosts:\n  - name: a\n    address: h\n    labels: ['-----BEGIN RSA PRIVATE KEY----- abc']\n",
            "pool.yml:4: hosts[0].labels[0]: keys and passwords never go in the pool file",
        ),
        (
            "hosts:\n  - {name: a, address: h1}\n  - {name: a, address: h2}\n",
            "pool.yml:3: hosts[1].name: duplicate host name 'a'",
        ),
        ("hosts:\n  - {name: a, adress: h1}\n", "did you mean 'address'?"),
        ("hosts: []\n", "hosts: List should have at least 1 item"),
        ("hosts:\n  - {name: a, address: h, network: bridge}\n", "hosts[0].network: String should match pattern"),
    ],
)
def test_bad_pool_files_name_the_line(tmp_path, text, message):
    with pytest.raises(ManifestError) as error:
        load_pool(write(tmp_path, text))
    assert message in str(error.value)
    assert all(
        line.startswith(f"{tmp_path / 'pool.yml'}:") for line in str(error.value).splitlines()
    )  # each problem a line


def test_a_queued_job_fails_after_the_queue_timeout_and_stops_when_canceled(tmp_path):
    import threading

    from runner.errors import PlacementError, TrainingCanceled
    from runner.targets.pool.dispatch import _wait_for_capacity
    from runner.telemetry.logger import Logger

    pool = hosts(("a", 1, 1))
    request = Request((Demand("main 0", gpus=1),))
    leases = leases_at(tmp_path)
    assert leases.try_place("holder", pool, lambda held: place(request, held)).placement.placed
    control = type("Control", (), {"cancel": threading.Event()})()
    with pytest.raises(
        PlacementError,
        match=r"compute.queue_timeout_seconds \(0s\) passed and the pool still has no room: main 0 needs 1 free GPUs",
    ):
        _wait_for_capacity(leases, "waiter", request, pool, 0, control, Logger())
    control.cancel.set()
    with pytest.raises(TrainingCanceled, match="canceled while queued"):
        _wait_for_capacity(leases, "waiter", request, pool, 60, control, Logger())


def test_the_example_pool_file_is_valid_for_tftrain_and_for_its_schema(repo):
    import json

    import jsonschema
    import yaml

    example = repo / "examples" / "pool" / "tftrain-pool.yml"
    assert [host.name for host in load_pool(example).pool.hosts] == ["gpu-1", "gpu-2", "cpu-1"]
    schema = json.loads((repo / "tftrain-pool.schema.json").read_text())
    jsonschema.validate(yaml.safe_load(example.read_text()), schema)


def test_an_mpi_job_maps_its_nodes_to_addresses_and_the_default_ssh_port(project, tmp_path):
    """The sshd port goes into each node's shell line: it must be the number (a slotted data class
    has no field defaults as class attributes)."""
    from runner.targets.pool.jobs import host_map
    from runner.targets.pool.schedule import Assignment, Placement

    pool = load_pool(
        write(
            tmp_path,
            """\
        hosts:
          - {name: a, address: 10.0.0.1}
          - {name: b, address: 10.0.0.2}
        """,
        )
    ).pool
    mpi = (
        "node_count: 2\ndistributed_training: {backend: mpi, process_count_per_node: 1}\ncompute: {target:"
        " pool}\ncustom_docker_image: img\n"
    )
    manifest = load_manifest(project(manifest=mpi)).manifest
    placement = Placement((Assignment("node 0", "a", cpus=1), Assignment("node 1", "b", cpus=1)))
    mapped = host_map(placement, pool, manifest)
    assert mapped.hosts == {"node 0": ("a", "10.0.0.1"), "node 1": ("b", "10.0.0.2")}
    assert mapped.ssh_port == 12345
    chosen = load_manifest(
        project(manifest=mpi.replace("process_count_per_node: 1", "process_count_per_node: 1, ssh_port: 2200"))
    ).manifest
    assert host_map(placement, pool, chosen).ssh_port == 2200
