"""The scheduler's cost, counted (not timed): what one pass asks of each node.

A pass over many pods of one shape (a thousand Ray heads, the slices' hosts) must ask the
node-only questions (taints, selectors, node affinity) once per node and shape, not once per
pod and node: with 8,000 TPU hosts a thousand heads would otherwise cost 8 million checks
(issue: cost that grows with the work, not faster). Quantities are integers in the scheduler's
units, parsed once per node version, not once per pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkube.nodes import build_nodes, parse_spec
from devkube.scheduler import placement
from devkube.scheduler.placement import Memo, Pending, Snapshot


def head(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"head-{i}", "namespace": "default", "uid": f"u{i}"},
        "spec": {"containers": [{"name": "ray-head", "resources": {"requests": {"cpu": "100m"}}}]},
    }


class CountingMemo(Memo):
    """Counts the node-only verdicts looked up (remembered or not)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def get(self, shape: str, node: str, version: str) -> tuple[bool, str | None]:
        self.asked.append(node)
        return super().get(shape, node, version)


@pytest.mark.parametrize("tpu_pools", [4, 16])
def test_node_only_checks_are_once_per_node_and_shape_per_pass(tpu_pools: int) -> None:
    nodes = build_nodes(parse_spec([f"tpu:v6e:4x4:{tpu_pools}", "cpu:2"]))
    memo = CountingMemo()
    snapshot = Snapshot(nodes, [], memo)
    heads = 50
    for i in range(heads):
        found = snapshot.place(head(i))
        assert found.node is not None and found.node.startswith("cpu")
        snapshot.assume(head(i), found.node)
    # One question per node for the one shape, however many heads (not heads x nodes).
    assert sorted(memo.asked) == sorted(n["metadata"]["name"] for n in nodes)
    # The next pass asks again (nodes may have changed), once per node, answered from memory.
    Snapshot(nodes, [], memo).place(head(heads))
    assert len(memo.asked) == 2 * len(nodes)


def test_allocatable_is_parsed_once_per_node_version(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = build_nodes(parse_spec(["tpu:v6e:4x4:2", "cpu:1"]))
    memo = Memo()
    parsed: list[str] = []
    plain = placement._amounts

    def counted(resources: Any) -> dict[str, int]:
        parsed.append("x")
        return plain(resources)

    monkeypatch.setattr(placement, "_amounts", counted)
    for _ in range(5):
        Snapshot(nodes, [], memo)
    assert len(parsed) == len(nodes)
    changed = {**nodes[0], "metadata": {**nodes[0]["metadata"], "resourceVersion": "99"}}
    Snapshot([changed, *nodes[1:]], [], memo)
    assert len(parsed) == len(nodes) + 1


def test_quantities_are_the_schedulers_integers() -> None:
    assert placement.amount("cpu", "100m") == 100
    assert placement.amount("cpu", "1.5") == 1500
    assert placement.amount("memory", "1Gi") == 2**30
    assert placement.amount("memory", "1.5") == 2  # whole units, rounded up, as Value()
    assert placement.amount("google.com/tpu", "4") == 4


def slice_host(cluster: int, s: int, h: int) -> dict[str, Any]:
    """A host of slice `s` of cluster `cluster`, with the operator's same-slice affinity."""
    replica = f"c{cluster}-s{s}"
    labels = {"ray.io/cluster": f"c{cluster}", "replica": replica}
    term = {
        "labelSelector": {"matchLabels": labels},
        "topologyKey": "cloud.google.com/gke-nodepool",
    }
    return {
        "metadata": {
            "name": f"{replica}-h{h}",
            "namespace": "default",
            "uid": f"{replica}-h{h}",
            "labels": labels,
        },
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            "containers": [{"name": "ray", "resources": {"limits": {"google.com/tpu": 4}}}],
        },
    }


def gang_sibling_looks(clusters: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many pending pods a pass over `clusters` clusters' slices looks at to count the
    gangs (every pod pending at once, as after the clusters are applied together)."""
    nodes = build_nodes(parse_spec([f"tpu:v6e:4x4:{2 * clusters}"]))
    pods = [slice_host(c, s, h) for c in range(clusters) for s in range(2) for h in range(4)]
    looked: list[str] = []
    plain = placement._labels

    def counted(obj: Any) -> Any:
        if "containers" in (obj.get("spec") or {}):  # a pod's labels read, not a node's
            looked.append(obj["metadata"]["name"])
        return plain(obj)

    monkeypatch.setattr(placement, "_labels", counted)
    snapshot, queue = Snapshot(nodes, []), Pending(pods)
    for i, pod in enumerate(pods):
        found = snapshot.place(pod, queue.after(i))
        assert found.node is not None
        snapshot.assume(pod, found.node)
    return len(looked)


def test_a_gang_counts_its_siblings_not_every_pending_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    # Per pod placed, the same number of looks at 5 clusters as at 40 (not O(pending)).
    few, many = gang_sibling_looks(5, monkeypatch), gang_sibling_looks(40, monkeypatch)
    assert few * 8 == many


def fit_checks(clusters: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Resource fit checks of one pass placing every slice host of `clusters` clusters."""
    nodes = build_nodes(parse_spec([f"tpu:v6e:4x4:{2 * clusters}"]))
    pods = [slice_host(c, s, h) for c in range(clusters) for s in range(2) for h in range(4)]
    checks: list[str] = []
    plain = placement._World.fits

    def counted(self: Any, requests: Any, node: Any) -> str | None:
        checks.append(node["metadata"]["name"])
        return plain(self, requests, node)

    monkeypatch.setattr(placement._World, "fits", counted)
    snapshot, queue = Snapshot(nodes, []), Pending(pods)
    for i, pod in enumerate(pods):
        found = snapshot.place(pod, queue.after(i))
        assert found.node is not None
        snapshot.assume(pod, found.node)
    return len(checks)


def test_a_gangs_first_pod_does_not_look_at_every_free_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first host of each slice used to check every free TPU node (O(nodes) per slice,
    # 280 -> 13,440 checks from 5 to 40 clusters); the pass's per-domain index checks each
    # node once per pass and each slice's pool after: 8 times the work, 8 times the checks.
    few, many = fit_checks(5, monkeypatch), fit_checks(40, monkeypatch)
    assert few * 8 == many


def test_pods_that_fit_nowhere_cost_one_look_at_every_node_until_one_is_placed() -> None:
    """Unreachable nodes under load leave hundreds of pods unschedulable at once: each one's
    reasons are those of the first of its kind while nothing has been placed."""
    nodes = build_nodes(parse_spec(["tpu:v6e:4x4:4", "cpu:2"]))
    memo = CountingMemo()
    snapshot = Snapshot(nodes, [], memo)
    huge = [head(i) for i in range(40)]
    for pod in huge:
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000"
    found = [snapshot.place(pod) for pod in huge]
    assert {f.node for f in found} == {None}
    assert len({f.message for f in found}) == 1
    assert "Insufficient cpu" in str(found[0].message)
    # The node-only questions of the shape once (passing), and the reasons once: not 40 times.
    assert len(memo.asked) == 2 * len(nodes)
    placed = snapshot.place(head(99))
    assert placed.node is not None
    snapshot.assume(head(99), placed.node)
    assert snapshot.place(huge[0]).node is None
    # A pod placed: the reasons are looked at again (the shape's node-only verdicts stand).
    assert len(memo.asked) == 3 * len(nodes)
