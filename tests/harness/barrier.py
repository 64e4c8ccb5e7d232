"""The barrier that proves a negative: "the operator has reconciled since the change".

A test that asserts that nothing happens (no pod created, no second head, a condition kept)
used to sleep and hope the operator had looked by then. Instead, `reconciled` returns once
1. the operator's caches have held, at one moment after the call, everything the API server
   holds for the RayCluster (the object and its pods, by resourceVersion), and then
2. a pass of that RayCluster begun after that moment has ended, writes and all.
Whatever the operator was going to do about the state as the test left it has been done by
then, so the test's assertion that nothing happened is as strong as the sleep's (stronger on
a loaded machine) and costs one pass instead of seconds. docs/design.md §8.1.
"""

from __future__ import annotations

from raycluster_operator.controller.raycluster.sources import BY_CLUSTER
from raycluster_operator.kube import PODS, RAYCLUSTERS, KubeClient, NotFound

from .objects import Obj
from .operator import RunningOperator
from .waiting import eventually


def _rv(obj: Obj | None) -> int:
    return int((obj or {}).get("metadata", {}).get("resourceVersion") or 0)


async def _server_state(admin: KubeClient, cluster: str, ns: str) -> tuple[int, dict[str, int]]:
    """The RayCluster's resourceVersion (0: none) and its pods' (uid -> resourceVersion)."""
    try:
        obj = await admin.get(RAYCLUSTERS, ns, cluster)
    except NotFound:
        obj = None
    listing = await admin.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}")
    pods = {p["metadata"]["uid"]: _rv(p) for p in listing.items}
    return _rv(obj), pods


async def caught_up(
    op: RunningOperator, admin: KubeClient, cluster: str, ns: str = "default", *, within: float
) -> None:
    """Until the operator's caches hold the server's state of the RayCluster and its pods."""
    caches = op.manager.sources.caches
    key = f"{ns}/{cluster}"

    async def same() -> None:
        cluster_rv, pods = await _server_state(admin, cluster, ns)
        cached = caches.clusters.get(key)
        assert (cached is None) == (cluster_rv == 0) and _rv(cached) >= cluster_rv, key
        seen = {p["metadata"]["uid"]: _rv(p) for p in caches.pods.by_index(BY_CLUSTER, key)}
        assert set(seen) == set(pods), f"{key}: pods {sorted(seen)} cached, {sorted(pods)} served"
        assert all(seen[uid] >= rv for uid, rv in pods.items()), f"{key}: older pods cached"

    await eventually(same, within, interval=0.02)


async def passed(op: RunningOperator, key: str, *, within: float) -> None:
    """Until a pass of ``key`` (``ns/name``) begun after this call has ended."""
    controller = op.manager.controller

    async def leading() -> None:
        assert controller.queue is not None, "the operator is not leading"

    await eventually(leading, within)
    target = controller.passes_begun[key] + 1
    assert controller.queue is not None
    controller.queue.add(key)

    async def ended() -> None:
        if op.task.done():
            op.task.result()
            raise RuntimeError("the operator exited")
        assert controller.passes_ended[key] >= target, f"{key}: no pass since the change yet"

    await eventually(ended, within, interval=0.02)


async def reconciled(
    op: RunningOperator,
    admin: KubeClient,
    cluster: str,
    ns: str = "default",
    *,
    passes: int = 1,
    within: float = 60.0,
) -> None:
    """The barrier: ``op`` has seen the RayCluster as it stands and finished a pass since
    (``passes`` passes, one after the other: "it stays quiet" over several looks).
    ``within`` only turns a hang into a failure."""
    await caught_up(op, admin, cluster, ns, within=within)
    for _ in range(passes):
        await passed(op, f"{ns}/{cluster}", within=within)
