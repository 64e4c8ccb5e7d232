"""Both operators on one real control plane: KubeRay's own (its kustomize CRDs and RBAC,
`--watch-namespace`) and ours (`--namespace`), and a pod watch that says who made and who
removed every pod (docs/design.md §8.3)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from devkube import DevCluster, KubeRayOperator
from raycluster_operator.devcluster.attach import operator_kubeconfig
from raycluster_operator.kube import RAYCLUSTERS, KubeClient
from tests.harness.cluster import start_dev_cluster, stop_dev_cluster
from tests.harness.objects import Obj
from tests.harness.operator import RunningOperator, launch_operator, operator_options
from tests.harness.waiting import eventually

#: client-go's request counter in KubeRay's /metrics, by verb.
REQUESTS = re.compile(r"^rest_client_requests_total\{([^}]*)\} (\d+)", re.MULTILINE)
RECONCILES = re.compile(
    r'^controller_runtime_reconcile_total\{controller="raycluster",[^}]*\} (\d+)',
    re.MULTILINE,
)
WRITES = ('method="POST"', 'method="PUT"', 'method="PATCH"', 'method="DELETE"')


@dataclass
class PodLog:
    """Every pod event of the cluster, from one list-and-watch: (type, namespace, name,
    created-by, controller uid, deleting)."""

    events: list[tuple[str, str, str, str, str, bool]] = field(default_factory=list)

    def mark(self) -> int:
        return len(self.events)

    def created(self, namespace: str, since: int = 0) -> list[tuple[str, str]]:
        """(pod, created-by) of each pod created in ``namespace`` since the mark."""
        return [(e[2], e[3]) for e in self.events[since:] if e[0] == "ADDED" and e[1] == namespace]

    def removed(self, namespace: str, since: int = 0) -> set[str]:
        """Pods whose deletion began (or that went) in ``namespace`` since the mark."""
        return {
            e[2] for e in self.events[since:] if e[1] == namespace and (e[0] == "DELETED" or e[5])
        }


async def _record(cluster: DevCluster, log: PodLog) -> None:
    async for event in cluster.client.list_and_watch("/api/v1/pods"):
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            continue
        meta = event.object.get("metadata") or {}
        owner = next(
            (r.get("uid", "") for r in meta.get("ownerReferences") or () if r.get("controller")),
            "",
        )
        log.events.append(
            (
                event.type,
                meta.get("namespace", ""),
                meta.get("name", ""),
                (meta.get("labels") or {}).get("app.kubernetes.io/created-by", ""),
                owner,
                bool(meta.get("deletionTimestamp")),
            )
        )


@dataclass
class Beside:
    cluster: DevCluster
    admin: KubeClient
    kuberay: KubeRayOperator
    pods: PodLog
    operators: list[RunningOperator] = field(default_factory=list)

    async def start_ours(self, *namespaces: str) -> RunningOperator:
        op = launch_operator(
            await operator_kubeconfig(self.cluster), operator_options(namespaces=namespaces)
        )
        self.operators.append(op)
        await op.synced(30)
        return op

    async def kuberay_counts(self) -> tuple[int, int]:
        """KubeRay's API writes so far and its RayCluster passes so far."""
        text = await self.kuberay.metrics()
        writes = sum(
            int(count)
            for labels, count in REQUESTS.findall(text)
            if labels.count("method=") and any(verb in labels for verb in WRITES)
        )
        return writes, sum(int(n) for n in RECONCILES.findall(text))

    async def kuberay_passed(self, name: str, namespace: str) -> None:
        """KubeRay's barrier: a metadata change it reconciles on (an annotation), then a pass
        of its RayCluster controller ended after it."""
        _, before = await self.kuberay_counts()
        await self.admin.patch(
            RAYCLUSTERS,
            namespace,
            name,
            {"metadata": {"annotations": {"test/look": str(before)}}},
        )

        async def passed() -> None:
            assert (await self.kuberay_counts())[1] > before

        await eventually(passed, 60)

    async def ready(self, name: str, namespace: str) -> Obj:
        async def check() -> Obj:
            obj = await self.admin.get(RAYCLUSTERS, namespace, name)
            assert (obj.get("status") or {}).get("state") == "ready", obj.get("status")
            return obj

        result: Obj = await eventually(check, 120)
        return result


@contextlib.asynccontextmanager
async def beside(kuberay_namespaces: tuple[str, ...], nodes: list[str]) -> AsyncIterator[Beside]:
    """A real control plane with KubeRay's operator watching ``kuberay_namespaces`` and a
    pod log running; our operators are started by the test (`Beside.start_ours`)."""
    # Without its Lease, like ours here (QUIET): a leader renews it with a PUT every 2 s, which
    # client-go's request metric counts with the writes a steady window must not see.
    kuberay = KubeRayOperator(kuberay_namespaces, args=("--enable-leader-election=false",))
    cluster = await start_dev_cluster(nodes, control_plane="kubernetes", addons=[kuberay])
    admin = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
    log = PodLog()
    recorder = asyncio.create_task(_record(cluster, log))
    world = Beside(cluster, admin, kuberay, log)
    try:
        yield world
    finally:
        for op in world.operators:
            if not op.task.done():
                await op.stop()
        recorder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await recorder
        await admin.close()
        await stop_dev_cluster(cluster)
