from __future__ import annotations

import pytest

from devkube.nodes import (
    CLIQUE_LABEL,
    NODEPOOL_LABEL,
    NodeSpecError,
    build_nodes,
    parse_spec,
    tpu_slice_shape,
)


@pytest.mark.parametrize(
    ("generation", "topology", "shape"),
    [
        ("v6e", "4x4", (4, 4)),
        ("v6e", "2x4", (1, 8)),
        ("v6e", "2x2", (1, 4)),
        ("v5e", "1x1", (1, 1)),
        ("v6e", "8x16", (32, 4)),
        ("v5e", "16x16", (64, 4)),
        ("v4", "2x2x1", (1, 4)),
        ("v4", "2x2x2", (2, 4)),
        ("v5p", "2x4x4", (8, 4)),
        ("tpu7x", "4x4x4", (16, 4)),
    ],
)
def test_slice_shape_follows_gke(generation: str, topology: str, shape: tuple[int, int]) -> None:
    assert tpu_slice_shape(generation, topology) == shape


@pytest.mark.parametrize(
    ("machine", "topology", "shape"),
    [
        ("ct6e-standard-4t", "2x4", (2, 4)),
        ("ct6e-standard-8t", "2x4", (1, 8)),
        ("ct6e-standard-4t", "2x2", (1, 4)),
        ("ct6e-standard-1t", "1x1", (1, 1)),
        ("ct5lp-hightpu-4t", "2x4", (2, 4)),
        ("ct5lp-hightpu-4t", "16x16", (64, 4)),
        ("ct5p-hightpu-4t", "2x2x4", (4, 4)),
    ],
)
def test_machine_type_fixes_chips_per_host(
    machine: str, topology: str, shape: tuple[int, int]
) -> None:
    group = parse_spec([f"tpu:{machine}:{topology}"])[0]
    assert tpu_slice_shape(group.generation, topology, machine) == shape  # type: ignore[union-attr]
    nodes = build_nodes([group])
    assert len(nodes) == shape[0]
    assert {n["status"]["capacity"]["google.com/tpu"] for n in nodes} == {str(shape[1])}
    assert {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes} == {machine}


def test_multi_host_v6e_2x4_is_a_pool_of_two_hosts_beside_the_single_host_form() -> None:
    nodes = build_nodes(parse_spec(["tpu:ct6e-standard-4t:2x4:2", "tpu:v6e:2x4"]))
    pools: dict[str, list[str]] = {}
    for n in nodes:
        pools.setdefault(n["metadata"]["labels"][NODEPOOL_LABEL], []).append(n["metadata"]["name"])
    assert pools == {
        "tpu-v6e-2x4-4t-0": ["tpu-v6e-2x4-4t-0-h0", "tpu-v6e-2x4-4t-0-h1"],
        "tpu-v6e-2x4-4t-1": ["tpu-v6e-2x4-4t-1-h0", "tpu-v6e-2x4-4t-1-h1"],
        "tpu-v6e-2x4-0": ["tpu-v6e-2x4-0-h0"],
    }
    single = nodes[-1]
    assert single["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "ct6e-standard-8t"
    assert single["status"]["capacity"]["memory"] == "1440Gi"
    assert nodes[0]["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] == "2x4"


@pytest.mark.parametrize(
    "entry",
    [
        "tpu:v6e:2x2x2",
        "tpu:v4:4x4",
        "tpu:v9:4x4",
        "gpu:x:4",
        "cpu",
        "tpu:ct6e-standard-8t:4x4",  # 8-chip VMs only make the single-host 2x4
        "tpu:ct6e-standard-1t:2x2",
        "tpu:ct5lp-hightpu-4t:1x1",
        "tpu:ct6e-standard-4t:2x2x2",
    ],
)
def test_bad_entries_are_rejected(entry: str) -> None:
    with pytest.raises(NodeSpecError):
        parse_spec([entry])


def test_each_tpu_pool_is_one_slice_of_hosts_with_gke_labels() -> None:
    nodes = build_nodes(parse_spec(["tpu:v6e:4x4:2"]))
    assert len(nodes) == 8
    pools = {n["metadata"]["labels"][NODEPOOL_LABEL] for n in nodes}
    assert len(pools) == 2
    first = nodes[0]
    labels = first["metadata"]["labels"]
    assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert labels["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert labels["kubernetes.io/hostname"] == first["metadata"]["name"]
    assert "topology.kubernetes.io/zone" in labels
    assert first["status"]["allocatable"]["google.com/tpu"] == "4"
    assert first["spec"]["taints"] == [
        {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}
    ]
    conditions = {c["type"]: c for c in first["status"]["conditions"]}
    assert [c["type"] for c in first["status"]["conditions"]] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    assert conditions["MemoryPressure"]["status"] == "False"
    assert conditions["Ready"] == {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }


def test_gpu_domain_hosts_share_a_clique() -> None:
    nodes = build_nodes(parse_spec(["gpu:gb200:18:2"]))
    assert len(nodes) == 36
    cliques = [n["metadata"]["labels"][CLIQUE_LABEL] for n in nodes]
    assert len(set(cliques)) == 2 and cliques.count(cliques[0]) == 18
    assert nodes[0]["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert nodes[0]["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
    assert "taints" not in build_nodes(parse_spec(["cpu:1"]))[0]["spec"]


def test_default_mix_and_unique_names_and_ips() -> None:
    nodes = build_nodes(parse_spec(None))
    assert len(nodes) == 8 + 18 + 4
    names = [n["metadata"]["name"] for n in nodes]
    ips = [n["status"]["addresses"][0]["address"] for n in nodes]
    cidrs = [n["spec"]["podCIDR"] for n in nodes]
    assert len(set(names)) == len(set(ips)) == len(set(cidrs)) == len(nodes)


def test_comma_separated_entries_and_repeated_shapes_get_distinct_pools() -> None:
    nodes = build_nodes(parse_spec(["cpu:1,cpu:2"]))
    assert [n["metadata"]["name"] for n in nodes] == ["cpu-0-n0", "cpu-1-n0", "cpu-1-n1"]
