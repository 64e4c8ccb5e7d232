"""The scheduler's placement rules, on plain dicts (no server)."""

from __future__ import annotations

from typing import Any

from devkube.nodes import NODEPOOL_LABEL, build_nodes, parse_spec
from devkube.scheduler.placement import Snapshot, place, pod_requests

NODES = build_nodes(parse_spec(["tpu:v6e:4x4:2", "cpu:2"]))


def tpu_pod(name: str, replica: str, *, tpus: int = 4, anti: bool = False) -> dict[str, Any]:
    affinity: dict[str, Any] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"replica": replica}},
                    "topologyKey": NODEPOOL_LABEL,
                }
            ]
        }
    }
    if anti:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "replica", "operator": "Exists"},
                            {"key": "replica", "operator": "NotIn", "values": [replica]},
                        ]
                    },
                    "topologyKey": NODEPOOL_LABEL,
                }
            ]
        }
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"replica": replica}},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4"},
            "affinity": affinity,
            "containers": [{"name": "ray", "resources": {"limits": {"google.com/tpu": tpus}}}],
        },
    }


def schedule_all(
    pods: list[dict[str, Any]], bound: list[dict[str, Any]] | None = None
) -> dict[str, str | None]:
    snapshot = Snapshot(NODES, bound or [])
    result: dict[str, str | None] = {}
    for i, pod in enumerate(pods):
        placement = snapshot.place(pod, pods[i + 1 :])
        result[pod["metadata"]["name"]] = placement.node
        if placement.node:
            snapshot.assume(pod, placement.node)
    return result


def pool_of(node: str | None) -> str:
    assert node is not None
    return next(n for n in NODES if n["metadata"]["name"] == node)["metadata"]["labels"][
        NODEPOOL_LABEL
    ]


def test_a_four_host_slice_lands_in_one_pool() -> None:
    placed = schedule_all([tpu_pod(f"s0-{h}", "s0") for h in range(4)])
    assert len({pool_of(node) for node in placed.values()}) == 1
    assert len(set(placed.values())) == 4


def test_later_hosts_follow_the_first_already_bound_host() -> None:
    first = tpu_pod("s0-0", "s0")
    pool1_host = next(
        n["metadata"]["name"] for n in NODES if n["metadata"]["name"].endswith("-1-h2")
    )
    first["spec"]["nodeName"] = pool1_host
    placed = schedule_all([tpu_pod(f"s0-{h}", "s0") for h in range(1, 4)], bound=[first])
    assert {pool_of(node) for node in placed.values()} == {pool_of(pool1_host)}


def test_anti_affinity_keeps_two_slices_apart() -> None:
    pods = [tpu_pod(f"{r}-{h}", r, tpus=1, anti=True) for r in ("s0", "s1") for h in range(4)]
    placed = schedule_all(pods)
    pools = {r: {pool_of(placed[f"{r}-{h}"]) for h in range(4)} for r in ("s0", "s1")}
    assert len(pools["s0"]) == len(pools["s1"]) == 1
    assert pools["s0"] != pools["s1"]


def test_existing_pods_anti_affinity_repels_a_newcomer() -> None:
    # The newcomer declares nothing, but the bound pod's anti-affinity matches it.
    guard = tpu_pod("guard", "s0", tpus=1, anti=True)
    guard["spec"]["nodeName"] = "tpu-v6e-4x4-0-h0"
    newcomer = {
        "metadata": {"name": "n", "namespace": "default", "labels": {"replica": "other"}},
        "spec": {
            "nodeSelector": {NODEPOOL_LABEL: "tpu-v6e-4x4-0"},
            "containers": [{"resources": {"limits": {"google.com/tpu": "1"}}}],
        },
    }
    result = place(newcomer, NODES, [guard])
    assert result.node is None
    assert "existing pods anti-affinity" in result.message


def test_a_third_slice_with_only_two_pools_stays_pending_with_a_reason() -> None:
    pods = [tpu_pod(f"{r}-{h}", r) for r in ("s0", "s1", "s2") for h in range(4)]
    placed = schedule_all(pods)
    assert all(placed[f"s2-{h}"] is None for h in range(4))
    snapshot_reason = place(
        pods[8],
        NODES,
        [{**p, "spec": {**p["spec"], "nodeName": placed[p["metadata"]["name"]]}} for p in pods[:8]],
    ).message
    assert snapshot_reason.startswith("0/10 nodes are available:")
    assert "8 Insufficient google.com/tpu" in snapshot_reason


def test_oversubscribed_cpu_request_stays_pending() -> None:
    pod = {
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"resources": {"requests": {"cpu": "1000", "memory": "1Gi"}}}],
        },
    }
    result = place(pod, NODES, [])
    assert result.node is None
    assert "10 Insufficient cpu" in result.message


def test_requests_default_to_limits_and_init_containers_take_the_max() -> None:
    pod = {
        "spec": {
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
            "containers": [
                {"resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
                {"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
            ],
        }
    }
    requests = pod_requests(pod)
    assert requests["cpu"] == 3000  # millicores, as kube-scheduler counts cpu
    assert requests["memory"] == 2**30


def test_node_selector_and_node_affinity_operators() -> None:
    def with_affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
                        }
                    }
                },
            },
        }

    gpu_less = with_affinity(
        {"key": "google.com/tpu-x", "operator": "DoesNotExist"},
        {"key": NODEPOOL_LABEL, "operator": "In", "values": ["cpu-0"]},
    )
    assert place(gpu_less, NODES, []).node == "cpu-0-n0"
    not_tpu = with_affinity(
        {"key": "cloud.google.com/gke-tpu-topology", "operator": "NotIn", "values": ["4x4"]}
    )
    assert place(not_tpu, NODES, []).node == "cpu-0-n0"
    tpu = with_affinity({"key": "cloud.google.com/gke-tpu-topology", "operator": "Exists"})
    tpu["spec"]["tolerations"] = [{"key": "google.com/tpu", "operator": "Exists"}]
    assert (place(tpu, NODES, []).node or "").startswith("tpu-v6e-4x4-0")
    nobody = with_affinity({"key": "kubernetes.io/hostname", "operator": "Gt", "values": ["3"]})
    result = place(nobody, NODES, [])
    assert result.node is None and "node affinity/selector" in result.message
    selector = {
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"containers": [{}], "nodeSelector": {"kubernetes.io/hostname": "cpu-0-n1"}},
    }
    assert place(selector, NODES, []).node == "cpu-0-n1"


def test_gt_and_lt_compare_integers() -> None:
    nodes = [
        {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], "rank": str(i)}}}
        for i, n in enumerate(NODES[-3:])
    ]
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "rank", "operator": "Gt", "values": ["0"]},
                                    {"key": "rank", "operator": "Lt", "values": ["2"]},
                                ]
                            }
                        ]
                    }
                }
            },
        },
    }
    assert place(pod, nodes, []).node == nodes[1]["metadata"]["name"]


def test_not_ready_nodes_and_terminal_pods() -> None:
    # As kube-scheduler: a NotReady node is kept off by the node lifecycle controller's
    # not-ready taint (TaintNodesByCondition), not by reading its Ready condition.
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    down = [
        {
            **n,
            "spec": {**n["spec"], "taints": [*(n["spec"].get("taints") or []), not_ready]},
            "status": {**n["status"], "conditions": [{"type": "Ready", "status": "False"}]},
        }
        for n in NODES
        if not n["spec"].get("taints")
    ]
    result = place({"metadata": {"name": "p"}, "spec": {"containers": [{}]}}, down, [])
    assert result.node is None
    assert f"{len(down)} node(s) had untolerated taint {{node.kubernetes.io/not-ready: }}" in (
        result.message
    )
    tolerant = {
        "metadata": {"name": "t"},
        "spec": {
            "containers": [{}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
        },
    }
    assert place(tolerant, down, []).node is not None
    # A Failed pod no longer holds its TPUs.
    dead = tpu_pod("old", "s9")
    dead["spec"]["nodeName"] = "tpu-v6e-4x4-0-h0"
    dead["status"] = {"phase": "Failed"}
    only = [n for n in NODES if n["metadata"]["name"] == "tpu-v6e-4x4-0-h0"]
    assert place(tpu_pod("new", "s8"), only, [dead]).node == "tpu-v6e-4x4-0-h0"
    dead["status"] = {"phase": "Running"}
    assert place(tpu_pod("new", "s8"), only, [dead]).node is None


def test_gang_prefers_a_domain_that_holds_every_pending_host() -> None:
    # Pool 0 has one host taken; a 4-host slice must go to pool 1 even though pool 0 sorts first.
    squatter = {
        "metadata": {"name": "sq", "namespace": "default", "labels": {}},
        "spec": {
            "nodeName": "tpu-v6e-4x4-0-h3",
            "containers": [{"resources": {"limits": {"google.com/tpu": 4}}}],
        },
    }
    pods = [tpu_pod(f"s0-{h}", "s0") for h in range(4)]
    placed = schedule_all(pods, bound=[squatter])
    assert all(node is not None for node in placed.values())
    assert {pool_of(node) for node in placed.values()} == {"tpu-v6e-4x4-1"}


def test_a_gang_seen_in_part_takes_an_untouched_pool_not_half_of_a_started_one() -> None:
    """Seen at 9,000 pods: slice A's first two hosts were bound in pool 0 while its last two
    were not yet visible; slice B, seen two hosts at a time, took the other half of pool 0,
    and both slices waited for ever. A gang that has not started goes to a pool nobody uses."""
    started = [
        {**tpu_pod(f"a-{h}", "a"), "spec": {**tpu_pod(f"a-{h}", "a")["spec"], "nodeName": node}}
        for h, node in enumerate(["tpu-v6e-4x4-0-h0", "tpu-v6e-4x4-0-h3"])
    ]
    placed = schedule_all([tpu_pod(f"b-{h}", "b") for h in range(2)], bound=started)
    assert {pool_of(node) for node in placed.values()} == {"tpu-v6e-4x4-1"}


def test_accelerator_nodes_only_take_pods_that_ask_for_the_accelerator() -> None:
    plain = {"metadata": {"name": "head"}, "spec": {"containers": [{}]}}
    only_tpu = [n for n in NODES if "google.com/tpu" in n["status"]["allocatable"]]
    result = place(plain, only_tpu, [])
    assert result.node is None and "8 node(s) had untolerated taint" in result.message
    assert place(plain, NODES, []).node == "cpu-0-n0"
    assert place(tpu_pod("w", "s0"), only_tpu, []).node is not None
