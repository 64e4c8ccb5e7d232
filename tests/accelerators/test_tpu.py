"""TPU slices: every topology of docs/design.md §9.2, the numOfHosts check, and the host env."""

from __future__ import annotations

import pytest

from raycluster_operator.accelerators import tpu
from raycluster_operator.accelerators.identity import HostIdentity
from raycluster_operator.accelerators.profile import validate_group
from tpu_topologies import GKE, TABLE

from .conftest import make_group, tpu_group


@pytest.mark.parametrize(("gen", "topology", "chips", "hosts"), TABLE)
def test_hosts_per_slice_matches_the_reference(
    gen: str, topology: str, chips: int, hosts: int
) -> None:
    assert tpu.hosts_per_slice(topology, chips) == hosts
    assert validate_group(tpu_group(GKE[gen], topology, chips, hosts), "g") == []


@pytest.mark.parametrize(("gen", "topology", "chips", "hosts"), TABLE)
def test_a_wrong_numofhosts_says_what_it_should_be(
    gen: str, topology: str, chips: int, hosts: int
) -> None:
    problems = validate_group(
        tpu_group(GKE[gen], topology, chips, hosts + 1), "spec.workerGroupSpecs[2]"
    )
    assert [p.path for p in problems] == ["spec.workerGroupSpecs[2].numOfHosts"]
    assert f"numOfHosts must be {hosts}" in problems[0].message
    assert topology in problems[0].message


def test_generations_know_their_gke_labels() -> None:
    for name, label in GKE.items():
        generation = tpu.generation_for(label)
        assert generation is not None and generation.name == name


@pytest.mark.parametrize(
    ("group", "path_end"),
    [
        (
            tpu_group("tpu-v6e-slice", "4x4x4", 4, 16),
            "nodeSelector['cloud.google.com/gke-tpu-topology']",
        ),
        (
            tpu_group("tpu-v4-podslice", "4x4", 4, 4),
            "nodeSelector['cloud.google.com/gke-tpu-topology']",
        ),
        (
            tpu_group("tpu-v6e-slice", "4by4", 4, 4),
            "nodeSelector['cloud.google.com/gke-tpu-topology']",
        ),
        (tpu_group("tpu-v4-podslice", "2x2x2", 8, 1), "containers"),
        (tpu_group("tpu-v6e-slice", "1x1", 4, 1), "containers"),
    ],
)
def test_impossible_tpu_shapes_are_reported(group: object, path_end: str) -> None:
    problems = validate_group(group, "spec.workerGroupSpecs[0]")  # type: ignore[arg-type]
    assert problems and problems[0].path.endswith(path_end), problems


def test_tpu_request_must_equal_limit() -> None:
    group = make_group(hosts=4, limits={"google.com/tpu": 4}, requests={"google.com/tpu": 2})
    (problem,) = validate_group(group, "spec.workerGroupSpecs[0]")
    assert problem.path == "spec.workerGroupSpecs[0].template.spec.containers"
    assert "equal" in problem.message


def test_without_a_topology_nothing_can_be_checked() -> None:
    assert validate_group(make_group(hosts=3, limits={"google.com/tpu": 4}), "g") == []


def test_non_tpu_groups_have_no_tpu_problems() -> None:
    assert validate_group(make_group(hosts=7), "g") == []


def test_pod_type_counts_cores_like_ray() -> None:
    assert tpu.pod_type(tpu.GENERATIONS[3], "4x4") == "v6e-16"
    assert tpu.pod_type(tpu.GENERATIONS[0], "2x2x2") == "v4-16"
    assert tpu.pod_type(tpu.GENERATIONS[1], "2x4") == "v5litepod-8"
    assert tpu.pod_type(tpu.GENERATIONS[4], "2x2x1") == "tpu7x-8"


def identity(host: int) -> HostIdentity:
    names = tuple(f"tpu-1-{h}.demo-headless" for h in range(4))
    return HostIdentity("demo", "tpu", 1, "tpu-bcd2f", host, 4, "tpu-1", names)


V6E = tpu.tpu_slice(tpu_group("tpu-v6e-slice", "4x4", 4, 4))


def test_env_of_a_v6e_4x4_host() -> None:
    env = dict(tpu.tpu_env(identity(2), V6E, (), megascale_coordinator=None))
    assert env == {
        "TPU_WORKER_ID": "2",
        "TPU_NAME": "tpu-1",
        "TPU_WORKER_HOSTNAMES": "tpu-1-0.demo-headless,tpu-1-1.demo-headless,"
        "tpu-1-2.demo-headless,tpu-1-3.demo-headless",
        "TPU_ACCELERATOR_TYPE": "v6e-16",
        "TPU_TOPOLOGY": "4x4",
        # The GKE webhook's device plugin address: the node's IP, port 2112.
        "TPU_DEVICE_PLUGIN_HOST_IP": {
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}
        },
        "TPU_DEVICE_PLUGIN_ADDR": "$(TPU_DEVICE_PLUGIN_HOST_IP):2112",
    }
    names = [k for k, _ in tpu.tpu_env(identity(2), V6E, (), megascale_coordinator=None)]
    # $(VAR) expansion only sees variables listed earlier.
    assert names.index("TPU_DEVICE_PLUGIN_HOST_IP") < names.index("TPU_DEVICE_PLUGIN_ADDR")


V7X = tpu.tpu_slice(tpu_group("tpu7x", "2x2x4", 4, 4))


def test_v7x_gives_every_tpu_container_its_own_worker_id_and_process_port() -> None:
    per = [
        dict(
            tpu.tpu_env(
                identity(1),
                V7X,
                (),
                megascale_coordinator="tpu-0-0.demo-headless",
                container_index=c,
                tpu_containers=2,
            )
        )
        for c in range(2)
    ]
    assert [e["TPU_WORKER_ID"] for e in per] == ["2", "3"]
    assert [e["TPU_PROCESS_PORT"] for e in per] == ["8476", "8477"]
    addresses = per[0]["TPU_PROCESS_ADDRESSES"].split(",")
    assert addresses[:3] == [
        "tpu-1-0.demo-headless:8476",
        "tpu-1-0.demo-headless:8477",
        "tpu-1-1.demo-headless:8476",
    ]
    assert (
        len(addresses) == 8 and per[1]["TPU_PROCESS_ADDRESSES"] == per[0]["TPU_PROCESS_ADDRESSES"]
    )
    # Hostnames stay one per host, as the webhook keeps them.
    assert per[0]["TPU_WORKER_HOSTNAMES"].count(",") == 3


def test_v7x_megascale_names_the_coordinator_port_and_a_port_per_container() -> None:
    env = [
        dict(
            tpu.tpu_env(
                identity(0),
                V7X,
                {"MEGASCALE_NUM_SLICES"},
                megascale_coordinator="tpu-0-0.demo-headless",
                container_index=c,
                tpu_containers=2,
            )
        )
        for c in range(2)
    ]
    assert env[0]["MEGASCALE_COORDINATOR_ADDRESS"] == "tpu-0-0.demo-headless:8081"
    assert [e["MEGASCALE_PORT"] for e in env] == ["8081", "8082"]


def test_older_generations_have_no_process_addresses() -> None:
    env = dict(tpu.tpu_env(identity(1), V6E, (), megascale_coordinator=None))
    assert "TPU_PROCESS_ADDRESSES" not in env and "TPU_PROCESS_PORT" not in env


def test_user_set_values_are_kept() -> None:
    env = dict(
        tpu.tpu_env(identity(2), V6E, {"TPU_NAME", "TPU_TOPOLOGY"}, megascale_coordinator=None)
    )
    assert "TPU_NAME" not in env and "TPU_TOPOLOGY" not in env
    assert env["TPU_WORKER_ID"] == "2"


def test_megascale_only_when_the_user_asked_for_slices() -> None:
    plain = dict(tpu.tpu_env(identity(0), V6E, (), megascale_coordinator="tpu-0-0.demo-headless"))
    assert not any(k.startswith("MEGASCALE") for k in plain)
    multi = dict(
        tpu.tpu_env(
            identity(0),
            V6E,
            {"MEGASCALE_NUM_SLICES"},
            megascale_coordinator="tpu-0-0.demo-headless",
        )
    )
    assert multi["MEGASCALE_SLICE_ID"] == "1"
    assert multi["MEGASCALE_COORDINATOR_ADDRESS"] == "tpu-0-0.demo-headless"
    assert multi["MEGASCALE_PORT"] == "8081"
