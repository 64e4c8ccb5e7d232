"""Profiles: which groups are TPU / NVLink / generic, and the placement each asks for."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from raycluster_operator.accelerators import (
    AcceleratorKind,
    HostIdentity,
    merge_affinity,
    profile_for,
    validate_group,
)

from .conftest import make_group, tpu_group

ID = HostIdentity("demo", "gpu", 3, "gpu-bcd2f", 1, 4, "gpu-3", ())
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def test_tpu_groups_pack_by_node_pool_one_slice_per_pool() -> None:
    profile = profile_for(tpu_group("tpu-v6e-slice", "4x4", 4, 4))
    assert profile.kind is AcceleratorKind.TPU
    assert profile.topology_key == "cloud.google.com/gke-nodepool"
    assert profile.exclusive


def test_tpu_exclusivity_can_be_turned_off_and_key_overridden() -> None:
    group = make_group(
        hosts=4,
        limits={"google.com/tpu": 4},
        annotations={
            "ray.io/exclusive-topology": "false",
            "ray.io/multi-host-topology-key": "example.com/rack",
        },
    )
    profile = profile_for(group)
    assert (profile.kind, profile.topology_key, profile.exclusive) == (
        AcceleratorKind.TPU,
        "example.com/rack",
        False,
    )


def test_multi_host_gpu_groups_are_nvlink_domains() -> None:
    profile = profile_for(make_group(hosts=18, limits={"nvidia.com/gpu": 4}))
    assert profile.kind is AcceleratorKind.GPU_NVLINK
    assert profile.topology_key == "nvidia.com/gpu.clique"
    assert not profile.exclusive
    assert profile.ray_labels(ID) == {"ray.io/gpu-domain": "gpu-3"}


def test_single_host_gpu_groups_are_generic() -> None:
    profile = profile_for(make_group(hosts=1, limits={"nvidia.com/gpu": 8}))
    assert profile.kind is AcceleratorKind.GENERIC
    assert profile.topology_key is None


def test_a_group_can_opt_into_nvlink_by_its_topology_key() -> None:
    group = make_group(
        hosts=2, annotations={"ray.io/multi-host-topology-key": "nvidia.com/gpu.clique"}
    )
    assert profile_for(group).kind is AcceleratorKind.GPU_NVLINK


def test_generic_groups_place_nothing_unless_asked() -> None:
    assert profile_for(make_group(hosts=4)).placement(ID) is None
    group = make_group(
        hosts=4,
        annotations={
            "ray.io/multi-host-topology-key": "topology.kubernetes.io/zone",
            "ray.io/exclusive-topology": "true",
        },
    )
    affinity = profile_for(group).placement(ID)
    assert affinity is not None
    (same,) = affinity["podAffinity"][REQ]
    assert same["topologyKey"] == "topology.kubernetes.io/zone"
    assert same["labelSelector"]["matchLabels"] == {
        "ray.io/cluster": "demo",
        "ray.io/group": "gpu",
        "ray.io/worker-group-replica-name": "gpu-bcd2f",
    }
    (other,) = affinity["podAntiAffinity"][REQ]
    assert {
        "key": "ray.io/worker-group-replica-name",
        "operator": "NotIn",
        "values": ["gpu-bcd2f"],
    } in other["labelSelector"]["matchExpressions"]


def test_single_host_pods_get_no_placement() -> None:
    profile = profile_for(tpu_group("tpu-v6e-slice", "2x2", 4, 1))
    single = HostIdentity("demo", "tpu", 0, None, 0, 1, "tpu-0", ())
    assert profile.placement(single) is None


def test_without_replica_name_the_slice_is_found_by_replica_index_label() -> None:
    profile = profile_for(tpu_group("tpu-v6e-slice", "4x4", 4, 4))
    no_name = HostIdentity("demo", "tpu", 2, None, 0, 4, "tpu-2", ())
    affinity = profile.placement(no_name)
    assert affinity is not None
    assert (
        affinity["podAffinity"][REQ][0]["labelSelector"]["matchLabels"]["replicaIndex"] == "tpu-2"
    )


def test_bad_annotations_are_problems() -> None:
    group = make_group(
        hosts=2,
        annotations={"ray.io/exclusive-topology": "yes", "ray.io/multi-host-topology-key": "a b"},
    )
    paths = {p.path for p in validate_group(group, "spec.workerGroupSpecs[0]")}
    assert paths == {
        "spec.workerGroupSpecs[0].template.metadata.annotations['ray.io/exclusive-topology']",
        "spec.workerGroupSpecs[0].template.metadata.annotations['ray.io/multi-host-topology-key']",
    }


def test_exclusive_needs_a_topology_key() -> None:
    group = make_group(hosts=2, annotations={"ray.io/exclusive-topology": "true"})
    (problem,) = validate_group(group, "g")
    assert "ray.io/multi-host-topology-key" in problem.message


USER_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        REQ: {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}
                    ]
                }
            ]
        }
    },
    "podAffinity": {
        REQ: [{"labelSelector": {"matchLabels": {"team": "a"}}, "topologyKey": "zone"}],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "x"}}
        ],
    },
}


def test_merge_keeps_every_user_term_and_adds_ours() -> None:
    ours = profile_for(tpu_group("tpu-v6e-slice", "4x4", 4, 4)).placement(ID)
    assert ours is not None
    merged = merge_affinity(USER_AFFINITY, ours)
    assert merged["nodeAffinity"] == USER_AFFINITY["nodeAffinity"]
    assert (
        merged["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        == (USER_AFFINITY["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"])
    )
    assert merged["podAffinity"][REQ] == [
        *USER_AFFINITY["podAffinity"][REQ],
        *ours["podAffinity"][REQ],
    ]
    assert merged["podAntiAffinity"][REQ] == ours["podAntiAffinity"][REQ]
    assert merge_affinity(merged, ours) == merged  # idempotent: never repeated


terms = st.lists(
    st.fixed_dictionaries(
        {
            "topologyKey": st.sampled_from(["a", "b", "c"]),
            "labelSelector": st.fixed_dictionaries(
                {
                    "matchLabels": st.dictionaries(
                        st.sampled_from(["x", "y"]), st.sampled_from(["1", "2"])
                    )
                }
            ),
        }
    ),
    max_size=4,
)


@given(terms, terms, terms)
def test_merge_never_drops_a_user_term(
    user_aff: list[Any], user_anti: list[Any], our: list[Any]
) -> None:
    user = {"podAffinity": {REQ: user_aff}, "podAntiAffinity": {REQ: user_anti}}
    merged = merge_affinity(user, {"podAffinity": {REQ: our}})
    assert all(t in merged["podAffinity"][REQ] for t in user_aff + our)
    assert merged["podAntiAffinity"][REQ] == user_anti
    assert user == {"podAffinity": {REQ: user_aff}, "podAntiAffinity": {REQ: user_anti}}
