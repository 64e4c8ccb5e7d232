"""Properties of placement over random workloads: never overcommit, always honour selectors."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from devkube.nodes import NODEPOOL_LABEL, build_nodes, parse_spec
from devkube.scheduler.placement import Snapshot, pod_requests
from devkube.scheduler.placement import amount as in_scheduler_units
from kubefacts.quantities import parse_quantity

NODES = build_nodes(parse_spec(["tpu:v6e:4x4:2", "gpu:gb200:4", "cpu:2"]))
POOLS = sorted({n["metadata"]["labels"][NODEPOOL_LABEL] for n in NODES})

pod_specs = st.lists(
    st.tuples(
        st.sampled_from(["cpu", "google.com/tpu", "nvidia.com/gpu"]),
        st.integers(min_value=1, max_value=8),
        st.one_of(st.none(), st.sampled_from(POOLS)),
    ),
    max_size=40,
)


def make_pod(i: int, resource: str, amount: int, pool: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {resource: str(amount)}}}]
    }
    if pool is not None:
        spec["nodeSelector"] = {NODEPOOL_LABEL: pool}
    return {"metadata": {"name": f"p{i}", "namespace": "default"}, "spec": spec}


@settings(max_examples=60, deadline=None)
@given(pod_specs)
def test_placement_never_overcommits_and_honours_selectors(specs: list[Any]) -> None:
    snapshot = Snapshot(NODES, [])
    by_name = {n["metadata"]["name"]: n for n in NODES}
    used: dict[str, dict[str, int]] = {name: {} for name in by_name}
    for i, (resource, amount, pool) in enumerate(specs):
        pod = make_pod(i, resource, amount, pool)
        placement = snapshot.place(pod)
        if placement.node is None:
            assert placement.message.startswith(f"0/{len(NODES)} nodes are available")
            continue
        node = by_name[placement.node]
        if pool is not None:
            assert node["metadata"]["labels"][NODEPOOL_LABEL] == pool
        snapshot.assume(pod, placement.node)
        for name, value in pod_requests(pod).items():
            used[placement.node][name] = used[placement.node].get(name, 0) + value
    for name, node in by_name.items():
        for resource, total in used[name].items():
            have = node["status"]["allocatable"].get(resource, "0")
            assert total <= in_scheduler_units(resource, str(have))


@given(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi"]),
)
def test_quantities_scale_by_their_suffix(number: int, suffix: str) -> None:
    scale = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
    }[suffix]
    assert parse_quantity(f"{number}{suffix}") == number * scale


def slice_pod(i: int, cluster: str, index: int, resource: str, amount: int) -> dict[str, Any]:
    """A multi-host pod as the operator builds it: required affinity to its own slice and
    anti-affinity to the group's other slices, by node pool."""
    pod = make_pod(i, resource, amount, None)
    labels = {"ray.io/cluster": cluster, "ray.io/group": "g", "slice": str(index)}
    pod["metadata"]["labels"] = labels
    pod["metadata"]["uid"] = f"uid-{i}"
    same = {"matchLabels": labels}
    others = {
        "matchLabels": {"ray.io/cluster": cluster, "ray.io/group": "g"},
        "matchExpressions": [
            {"key": "slice", "operator": "Exists"},
            {"key": "slice", "operator": "NotIn", "values": [str(index)]},
        ],
    }
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    pod["spec"]["affinity"] = {
        "podAffinity": {required: [{"labelSelector": same, "topologyKey": NODEPOOL_LABEL}]},
        "podAntiAffinity": {required: [{"labelSelector": others, "topologyKey": NODEPOOL_LABEL}]},
    }
    return pod


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(min_value=0, max_value=2),
            st.sampled_from(["cpu", "google.com/tpu", "nvidia.com/gpu"]),
            st.integers(min_value=1, max_value=4),
        ),
        max_size=30,
    )
)
def test_the_indexed_search_finds_exactly_the_nodes_a_check_of_every_node_accepts(
    specs: list[Any],
) -> None:
    from devkube.scheduler.placement import _World

    world = _World(NODES, [])
    for i, (cluster, index, resource, amount) in enumerate(specs):
        pod = slice_pod(i, cluster, index, resource, amount)
        requests = pod_requests(pod)
        rules = world.affinity_rules(pod)
        plain = [
            name
            for name in world.names
            if world.why_not(pod, world.nodes[name], requests, rules) is None
        ]
        assert world.feasible(pod, requests, rules) == plain
        if plain:
            world.add(pod, plain[0])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(min_value=0, max_value=2),
            st.sampled_from(["google.com/tpu", "nvidia.com/gpu", "cpu"]),
            st.integers(min_value=1, max_value=4),
        ),
        max_size=30,
    ),
    st.lists(st.integers(min_value=0, max_value=len(NODES) - 1), max_size=6),
)
def test_a_gangs_first_pod_lands_where_the_plain_search_puts_it(
    specs: list[Any], squatted: list[int]
) -> None:
    """The per-domain index (`_first_of_gang`) picks the node `_prefer_whole_gang` picks from
    every feasible node, pass after pass, with pods pending behind and nodes taken before."""
    from devkube.scheduler import placement

    squatters = [
        {
            "metadata": {"name": f"sq{i}", "namespace": "other", "uid": f"sq{i}"},
            "spec": {
                "nodeName": NODES[n]["metadata"]["name"],
                "containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}],
            },
        }
        for i, n in enumerate(squatted)
    ]
    pods = [slice_pod(i, *spec) for i, spec in enumerate(specs)]
    indexed, plain = Snapshot(NODES, squatters), Snapshot(NODES, squatters)
    queue = placement.Pending(pods)
    real = placement._first_of_gang
    for i, pod in enumerate(pods):
        placement._first_of_gang = real
        fast = indexed.place(pod, queue.after(i))
        placement._first_of_gang = lambda *_: None
        try:
            slow = plain.place(pod, pods[i + 1 :])
        finally:
            placement._first_of_gang = real
        assert fast.node == slow.node
        if fast.node is not None:
            indexed.assume(pod, fast.node)
            plain.assume(pod, fast.node)
