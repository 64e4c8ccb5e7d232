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


@pytest.mark.parametrize("entry", ["tpu:v6e:2x2x2", "tpu:v4:4x4", "tpu:v9:4x4", "gpu:x:4", "cpu"])
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
    assert first["status"]["conditions"][0] == {
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
