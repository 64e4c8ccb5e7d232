"""The dev cluster's controllers' cost per change, counted (not timed).

Issue #26: convergence of N RayClusters must cost O(N), so one pod's change must cost the
controllers the same whatever else is stored. Each test builds a world of `clusters` RayCluster
look-alikes (a head and two 4-host slices, two per-slice budgets), feeds one pod change through
the shared informer as its watch would, and counts what the next pass touches: the same at 10
clusters as at 100. The controllers are driven without a server (`Informer.apply`); a fake
client records what they would write.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkube.addons.maintenance import (
    MAINTENANCE_LABEL,
    OPT_IN_ANNOTATION,
    STOP_KUBELET,
    HostMaintenance,
)
from devkube.controllers.disruption import DisruptionController
from devkube.controllers.gc import GarbageCollector
from devkube.controllers.podgc import PodGarbageCollector
from devkube.controllers.resourceclaims import ResourceClaimController
from devkube.controllers.tainteviction import TaintEvictionController
from devkube.machinery.client import ApiClient, ApiError, WatchEvent
from devkube.machinery.discovery import Discovery, ResourceInfo
from devkube.machinery.informer import Informer


class Recorder:
    """Stands in for the API client: every write is recorded and answered with its body."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []
        #: Where a replaced object comes back as its watch would show it.
        self.echo: Informer | None = None

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("replace", path))
        if self.echo is not None:  # a status write: the stored object with the new status
            meta = body["metadata"]
            stored = self.echo.cache[(meta["namespace"], meta["name"])]
            self.echo.apply(WatchEvent("MODIFIED", {**stored, "status": body["status"]}))
        return body

    async def patch(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.writes.append(("patch", path))
        return body

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("create", path))
        return body

    async def delete(self, path: str, **_: Any) -> None:
        self.writes.append(("delete", path))

    async def get(self, path: str) -> dict[str, Any]:
        """Every object read is gone (the pod gc's live look at a node missing from its cache)."""
        self.writes.append(("get", path))
        raise ApiError(404, {"reason": "NotFound"})


def client(recorder: Recorder) -> ApiClient:
    fake: Any = recorder
    return fake


def pod(cluster: int, name: str, replica: str | None, node: str, ready: bool) -> dict[str, Any]:
    labels = {"ray.io/cluster": f"c{cluster}", "ray.io/node-type": "worker" if replica else "head"}
    if replica:
        labels["ray.io/worker-group-replica-name"] = replica
    return {
        "metadata": {
            "name": f"c{cluster}-{name}",
            "namespace": "default",
            "uid": f"uid-c{cluster}-{name}",
            "labels": labels,
        },
        "spec": {"nodeName": node, "containers": [{"name": "ray"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def world(clusters: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pods, budgets) of `clusters` RayClusters: a head and 2 slices x 4 hosts, a budget each
    slice with minAvailable 4 (as the operator makes them), every pod Ready."""
    pods: list[dict[str, Any]] = []
    budgets: list[dict[str, Any]] = []
    for c in range(clusters):
        pods.append(pod(c, "head", None, f"cpu-{c}", True))
        for s in range(2):
            replica = f"c{c}-tpu-{s}"
            for h in range(4):
                pods.append(pod(c, f"tpu-{s}-{h}", replica, f"tpu-{c}-{s}-{h}", True))
            budgets.append(
                {
                    "metadata": {"name": replica, "namespace": "default", "generation": 1},
                    "spec": {
                        "minAvailable": 4,
                        "selector": {
                            "matchLabels": {
                                "ray.io/cluster": f"c{c}",
                                "ray.io/worker-group-replica-name": replica,
                            }
                        },
                    },
                }
            )
    return pods, budgets


def listed(items: list[dict[str, Any]]) -> WatchEvent:
    return WatchEvent("SYNC", {"items": items})


class Scans(dict[Any, Any]):
    """A watch cache that counts the passes over all of it (a controller must not make one
    per change)."""

    def __init__(self, cache: dict[Any, Any]) -> None:
        super().__init__(cache)
        self.scans = 0

    def values(self) -> Any:
        self.scans += 1
        return super().values()

    def items(self) -> Any:
        self.scans += 1
        return super().items()

    def __iter__(self) -> Any:
        self.scans += 1
        return super().__iter__()


def scans(informer: Informer) -> int:
    cache: Any = informer.cache
    return int(cache.scans)


def watched(informer: Informer, items: list[dict[str, Any]]) -> None:
    """The informer's first list, its cache then counting scans from zero."""
    informer.apply(listed(items))
    informer.cache = Scans(informer.cache)


def not_ready(p: dict[str, Any]) -> dict[str, Any]:
    return {**p, "status": {**p["status"], "conditions": [{"type": "Ready", "status": "False"}]}}


async def disruption_cost(clusters: int) -> tuple[int, int, list[tuple[str, str]]]:
    """(budgets synced, pods filed) by the pass after one worker pod went unready."""
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    controller = DisruptionController(client(recorder), pods=pods)
    all_pods, budgets = world(clusters)
    pods.apply(listed(all_pods))
    controller.budgets.apply(listed(budgets))
    recorder.echo = controller.budgets
    await controller.sync()  # the first pass syncs every budget
    assert controller.synced == len(budgets)
    await controller.sync()  # and its own writes come back: each budget once more, unchanged
    assert controller.synced == 2 * len(budgets)
    synced, filed = controller.synced, controller._pods.touched
    recorder.writes.clear()
    pods.cache = Scans(pods.cache)
    pods.apply(WatchEvent("MODIFIED", not_ready(all_pods[1])))  # cluster 0, slice 0, host 0
    await controller.sync()
    assert scans(pods) == 0  # no pass over every pod
    return controller.synced - synced, controller._pods.touched - filed, recorder.writes


@pytest.mark.parametrize("clusters", [10, 100])
async def test_a_pod_change_syncs_only_the_budgets_that_may_select_it(clusters: int) -> None:
    synced, filed, writes = await disruption_cost(clusters)
    # The two budgets of the pod's cluster (filed under its ray.io/cluster label), not 2 x N.
    assert synced == 2
    assert filed == 1
    # Only its slice's budget changed: one host short of minAvailable 4.
    assert writes == [
        ("replace", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/c0-tpu-0/status")
    ]


async def test_a_quiet_pass_syncs_no_budget() -> None:
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    controller = DisruptionController(client(recorder), pods=pods)
    all_pods, budgets = world(20)
    pods.apply(listed(all_pods))
    controller.budgets.apply(listed(budgets))
    recorder.echo = controller.budgets
    await controller.sync()
    await controller.sync()
    synced = controller.synced
    await controller.sync()  # the periodic pass, nothing changed: no budget reads time
    assert controller.synced == synced


async def claims_cost(clusters: int) -> int:
    """Pods the resourceclaim controller's index filed for one pod change (none want claims)."""
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    claims = Informer(client(recorder), "/apis/resource.k8s.io/v1/resourceclaims")
    templates = Informer(client(recorder), "/apis/resource.k8s.io/v1/resourceclaimtemplates")
    controller = ResourceClaimController(
        client(recorder), pods=pods, claims=claims, templates=templates
    )
    all_pods, _ = world(clusters)
    for informer, items in ((claims, []), (templates, []), (pods, all_pods)):
        watched(informer, items)
    before = controller._wanting.touched + controller._by_uid.touched
    pods.apply(WatchEvent("MODIFIED", not_ready(all_pods[1])))
    await controller.sync()
    assert recorder.writes == []
    assert scans(pods) == 0  # no pass over every pod
    return controller._wanting.touched + controller._by_uid.touched - before


@pytest.mark.parametrize("clusters", [10, 100])
async def test_resourceclaims_pass_costs_the_change_not_the_pods(clusters: int) -> None:
    assert await claims_cost(clusters) == 2  # the changed pod, filed once in each index


def nodes_of(all_pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = sorted({p["spec"]["nodeName"] for p in all_pods})
    return [{"metadata": {"name": n, "uid": f"uid-{n}"}, "spec": {}} for n in names]


async def podgc_cost(clusters: int) -> tuple[int, list[tuple[str, str]]]:
    """(pod scans, writes) of the pass after one node is deleted, with every other node fine."""
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    nodes = Informer(client(recorder), "/api/v1/nodes")
    collector = PodGarbageCollector(client(recorder), nodes=nodes, pods=pods)
    all_pods, _ = world(clusters)
    all_nodes = nodes_of(all_pods)
    watched(nodes, all_nodes)
    watched(pods, all_pods)
    await collector.collect()  # after the first lists: every node with pods, once
    gone = next(n for n in all_nodes if n["metadata"]["name"] == "tpu-0-0-0")
    nodes.apply(WatchEvent("DELETED", gone))
    recorder.writes.clear()
    await collector.collect()
    return scans(pods) + scans(nodes), recorder.writes


@pytest.mark.parametrize("clusters", [10, 100])
async def test_podgc_looks_at_the_deleted_nodes_pods_only(clusters: int) -> None:
    scanned, writes = await podgc_cost(clusters)
    assert scanned == 0
    # The pod of the deleted node: confirmed gone (GET), marked Failed, force-deleted.
    pod_path = "/api/v1/namespaces/default/pods/c0-tpu-0-0"
    assert writes == [
        ("get", "/api/v1/nodes/tpu-0-0-0"),
        ("patch", f"{pod_path}/status"),
        ("delete", pod_path),
    ]


async def test_podgc_pass_with_nothing_in_question_reads_nothing() -> None:
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    nodes = Informer(client(recorder), "/api/v1/nodes")
    collector = PodGarbageCollector(client(recorder), nodes=nodes, pods=pods)
    all_pods, _ = world(30)
    watched(nodes, nodes_of(all_pods))
    watched(pods, all_pods)
    await collector.collect()
    before = collector._on_node.touched
    pods.apply(WatchEvent("MODIFIED", not_ready(all_pods[1])))  # on a node that exists
    await collector.collect()
    assert scans(pods) + scans(nodes) == 0
    assert collector._on_node.touched - before == 1
    assert recorder.writes == []


@pytest.mark.parametrize("clusters", [10, 100])
async def test_taint_eviction_looks_at_the_tainted_nodes_pods_only(clusters: int) -> None:
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    nodes = Informer(client(recorder), "/api/v1/nodes")
    controller = TaintEvictionController(client(recorder), nodes=nodes, pods=pods)
    all_pods, _ = world(clusters)
    all_nodes = nodes_of(all_pods)
    watched(nodes, all_nodes)
    watched(pods, all_pods)
    await controller.sweep()  # no taints: nothing to read
    assert scans(pods) + scans(nodes) == 0
    node = next(n for n in all_nodes if n["metadata"]["name"] == "tpu-0-0-0")
    taint = {"key": "example.com/broken", "effect": "NoExecute"}
    nodes.apply(WatchEvent("MODIFIED", {**node, "spec": {"taints": [taint]}}))
    await controller.sweep()
    assert scans(pods) + scans(nodes) == 0
    # Its one pod is evicted: DisruptionTarget, an Event, the delete.
    pod_path = "/api/v1/namespaces/default/pods/c0-tpu-0-0"
    assert recorder.writes == [
        ("patch", f"{pod_path}/status"),
        ("create", "/api/v1/namespaces/default/events"),
        ("delete", pod_path),
    ]


async def test_host_maintenance_looks_at_opted_in_nodes_only() -> None:
    recorder = Recorder()
    nodes = Informer(client(recorder), "/api/v1/nodes")
    maintenance = HostMaintenance(client(recorder), nodes=nodes, clock=lambda: 1000.0)
    all_nodes = nodes_of(world(50)[0])
    opted = {
        **all_nodes[0],
        "metadata": {
            **all_nodes[0]["metadata"],
            "labels": {MAINTENANCE_LABEL: "999"},
            "annotations": {OPT_IN_ANNOTATION: STOP_KUBELET},
        },
    }
    watched(nodes, [opted, *all_nodes[1:]])
    await maintenance.run()
    assert scans(nodes) == 0
    assert recorder.writes == [("patch", f"/api/v1/nodes/{all_nodes[0]['metadata']['name']}")]


PODS_INFO = ResourceInfo("v1", "pods", "Pod", True, frozenset({"list", "watch", "delete"}))
CLUSTERS_INFO = ResourceInfo(
    "ray.io/v1", "rayclusters", "RayCluster", True, frozenset({"list", "watch", "delete"})
)


def owned(p: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    ref = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    return {**p, "metadata": {**p["metadata"], "ownerReferences": [ref]}}


async def gc_cost(clusters: int) -> tuple[int, list[tuple[str, str]]]:
    """(objects looked at, writes) by the pass after one RayCluster is deleted."""
    recorder = Recorder()
    collector = GarbageCollector(client(recorder), Discovery(client(recorder)))
    owners = [
        {"metadata": {"name": f"c{c}", "namespace": "default", "uid": f"uid-c{c}"}}
        for c in range(clusters)
    ]
    all_pods, _ = world(clusters)
    dependents = [
        owned(p, owners[int(p["metadata"]["labels"]["ray.io/cluster"][1:])]) for p in all_pods
    ]
    collector._index(CLUSTERS_INFO, listed(owners))
    collector._index(PODS_INFO, listed(dependents))
    await collector.collect()  # after the first lists: everything, once
    looked = collector.looked_at
    collector._index(CLUSTERS_INFO, WatchEvent("DELETED", owners[0]))
    recorder.writes.clear()
    collector._discovery.lookup = lambda *_: CLUSTERS_INFO  # type: ignore[method-assign]
    await collector.collect()
    return collector.looked_at - looked, recorder.writes


@pytest.mark.parametrize("clusters", [10, 100])
async def test_gc_looks_at_the_dependents_of_what_went_only(clusters: int) -> None:
    looked, writes = await gc_cost(clusters)
    assert looked == 9  # the deleted RayCluster's head and 8 hosts, whatever else is stored
    # Each confirmed gone (GET) and deleted.
    assert sorted(w for w, _ in writes) == ["delete"] * 9 + ["get"] * 9


async def test_a_dependent_whose_owner_is_not_known_yet_is_asked_again_until_it_is() -> None:
    """Passes look only at what changed; a dependent whose owner's kind is not discovered yet
    (a CRD still coming) stays in question, as every pass asked before, or it would leak."""
    recorder = Recorder()
    collector = GarbageCollector(client(recorder), Discovery(client(recorder)))
    owner = {"metadata": {"name": "c0", "namespace": "default", "uid": "uid-c0"}}
    orphan = owned(world(1)[0][0], owner)
    collector._discovery.lookup = lambda *_: None  # type: ignore[method-assign]
    collector._index(PODS_INFO, listed([orphan]))
    await collector.collect()
    await collector.collect()
    assert recorder.writes == []  # never guessed gone
    collector._discovery.lookup = lambda *_: CLUSTERS_INFO  # type: ignore[method-assign]
    await collector.collect()  # no event came: still in question, now decided
    path = f"/api/v1/namespaces/default/pods/{orphan['metadata']['name']}"
    assert ("delete", path) in recorder.writes


async def test_podgc_asks_again_about_a_node_the_server_did_not_answer_for() -> None:
    """A pass looks only at the nodes in question; one whose live look failed stays so."""
    recorder = Recorder()
    pods = Informer(client(recorder), "/api/v1/pods")
    nodes = Informer(client(recorder), "/api/v1/nodes")
    collector = PodGarbageCollector(client(recorder), nodes=nodes, pods=pods)
    all_pods, _ = world(3)
    all_nodes = nodes_of(all_pods)
    watched(nodes, all_nodes)
    watched(pods, all_pods)
    await collector.collect()
    gone = next(n for n in all_nodes if n["metadata"]["name"] == "tpu-0-0-0")
    nodes.apply(WatchEvent("DELETED", gone))
    answer = recorder.get

    async def unavailable(path: str) -> dict[str, Any]:
        recorder.writes.append(("get", path))
        raise ApiError(503, {"reason": "ServiceUnavailable"})

    recorder.get = unavailable  # type: ignore[method-assign]
    await collector.collect()
    assert recorder.writes == [("get", "/api/v1/nodes/tpu-0-0-0")]  # never guessed gone
    recorder.get = answer  # type: ignore[method-assign]
    await collector.collect()  # no event came: still in question, now decided
    assert ("delete", "/api/v1/namespaces/default/pods/c0-tpu-0-0") in recorder.writes
