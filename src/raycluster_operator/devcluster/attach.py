"""The operator in a dev cluster, as production runs it: as its ServiceAccount with deploy/'s
RBAC, attached in this process over HTTPS, or deployed as the dev overlay's Deployment.

`raycluster-operator dev` and the test harness (tests/harness/world.py, tests/ray) both come
through here, so the suite runs the operator exactly as the command does (docs/design.md §8.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from raycluster_operator.controller import install
from raycluster_operator.controller.crds import (
    crd_manifest,
    rayjob_crd_manifest,
    rayservice_crd_manifest,
)
from raycluster_operator.planning import PlanOptions

if TYPE_CHECKING:
    from devkube import DevCluster

log = logging.getLogger("raycluster_operator.dev")

#: Planning options of an operator started without flags (PlanOptions is frozen).
DEFAULT_PLANNING = PlanOptions()

#: What `kubectl apply -k deploy/overlays/dev` applies (tests/test_install_kustomize.py holds
#: the two together): the cluster-wide install, its pods running this checkout's operator.
DEV_COMMAND = ["raycluster-operator"]
DEV_ARGS = [
    "run",
    "--leader-elect",
    "--log-format=text",
    "--health-addr=$(POD_IP):8082",
    "--metrics-addr=$(POD_IP):8080",
]
DEV_READINESS_PERIOD = 2
#: `run --unready-slice-timeout`'s default (the dev overlay leaves it out).
DEFAULT_UNREADY_SLICE_TIMEOUT = 60.0


def hint(text: str) -> None:
    """A line for the person at the terminal (stderr: stdout is the live view's)."""
    print(text, file=sys.stderr, flush=True)


async def install_crd(cluster: DevCluster) -> None:
    """The CRDs the operator ships: RayCluster, RayJob and RayService."""
    for crd in (crd_manifest(), rayjob_crd_manifest(), rayservice_crd_manifest()):
        await cluster.apply(crd)
        log.info("installed CRD %s", crd["metadata"]["name"])


def jobs_api_via(cluster: DevCluster) -> str:
    """How an operator on this host reaches a head's Jobs API: no cluster DNS here, so the
    head pod's IP when pods really run (the process runtime), else the service name."""
    runtime = getattr(cluster.kubelet, "runtime", None)
    return "head-pod-ip" if type(runtime).__name__ == "ProcessRuntime" else "service"


async def operator_kubeconfig(cluster: DevCluster) -> dict[str, Any]:
    """Install the operator's ServiceAccount and RBAC exactly as `manifests all` ships them
    (deploy/base/rbac.yaml: the ServiceAccount, ClusterRole and binding, and the leader-election
    Role, in namespace raycluster-operator) and return a kubeconfig that acts as that
    ServiceAccount, with a token from the TokenRequest API. The operator then holds in the
    dev cluster exactly the permissions it holds in production: a missing grant fails here."""
    namespace = install.NAME
    await cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await cluster.install([install.service_account(namespace), *install.cluster_rbac(namespace)])
    return await cluster.service_account_kubeconfig(namespace, install.NAME)


@contextlib.asynccontextmanager
async def operator_attached(
    cluster: DevCluster,
    *,
    enabled: bool,
    planning: PlanOptions = DEFAULT_PLANNING,
    namespaces: tuple[str, ...] = (),
) -> AsyncIterator[None]:
    """The operator runs in this process as a task, but reaches the cluster only over HTTPS
    with its own ServiceAccount's kubeconfig (`operator_kubeconfig`), exactly as a deployed
    operator does; it is stopped (drained) when the block exits. ``namespaces``: `run
    --namespace` (all when empty)."""
    if not enabled:
        yield
        return
    from raycluster_operator.controller.manager import Manager, ManagerOptions
    from raycluster_operator.controller.raycluster.registration import ControllerOptions
    from raycluster_operator.controller.raycluster.sources import SourceOptions
    from raycluster_operator.controller.rayjob.reconciler import RayJobOptions
    from raycluster_operator.controller.rayservice.reconciler import RayServiceOptions
    from raycluster_operator.controller.runtime.serving import ServingOptions
    from raycluster_operator.kube import KubeClient

    logging.getLogger("httpx2").setLevel(logging.WARNING)
    client = KubeClient.from_kubeconfig(await operator_kubeconfig(cluster))
    manager = Manager(
        client,
        ManagerOptions(
            serving=ServingOptions(
                metrics_addr="127.0.0.1:0",
                health_addr="127.0.0.1:0",
                leader_elect=False,
                identity="dev-operator",
            ),
            controller=ControllerOptions(resync_period=60.0),
            sources=SourceOptions(namespaces=namespaces),
            planning=planning,
            # On the host, the operator reaches a head's Jobs API at the head pod's IP.
            rayjobs=RayJobOptions(jobs_api_via=jobs_api_via(cluster)),
            rayservices=RayServiceOptions(serve_api_via=jobs_api_via(cluster)),
        ),
    )
    task = asyncio.create_task(manager.run(), name="operator")
    try:
        async with asyncio.timeout(30):
            await _synced(manager, task)
        metrics = manager.metrics_server.port if manager.metrics_server else 0
        log.info(
            "operator attached as ServiceAccount raycluster-operator/raycluster-operator with "
            "deploy/base/rbac.yaml's grants (metrics on http://127.0.0.1:%d/metrics)",
            metrics,
        )
        hint(
            "try: kubectl get rayclusters,pods -L ray.io/group,"
            "ray.io/worker-group-replica-index,ray.io/replica-host-index"
        )
        yield
    finally:
        manager.stop()
        with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
            async with asyncio.timeout(15):
                await task
        await client.close()


def deployed_manifests(
    unready_slice_timeout: float = 60.0, namespaces: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The dev overlay's objects. The process runtime ignores images and puts the dev
    cluster's own bin directory first on PATH, so the pods run this installation; all pods
    share one network namespace there, so the servers bind the pod IP rather than every
    address (two replicas on :8082 would collide)."""
    objects = [
        crd_manifest(),
        rayjob_crd_manifest(),
        rayservice_crd_manifest(),
        *install.operator_manifests(),
    ]
    for obj in objects:
        if obj["kind"] == "Deployment":
            container = obj["spec"]["template"]["spec"]["containers"][0]
            container["command"] = list(DEV_COMMAND)
            container["args"] = list(DEV_ARGS)
            if unready_slice_timeout != DEFAULT_UNREADY_SLICE_TIMEOUT:
                container["args"].append(f"--unready-slice-timeout={unready_slice_timeout:g}")
            if namespaces:
                container["args"].append(f"--namespace={','.join(namespaces)}")
            container["env"] = [
                *container.get("env", []),
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ]
            container["readinessProbe"] = {
                **container["readinessProbe"],
                "periodSeconds": DEV_READINESS_PERIOD,
            }
    return objects


@contextlib.asynccontextmanager
async def operator_deployed(
    cluster: DevCluster,
    *,
    enabled: bool = True,
    planning: PlanOptions = DEFAULT_PLANNING,
    namespaces: tuple[str, ...] = (),
) -> AsyncIterator[None]:
    """The operator as a Deployment in the cluster: ready once the rollout is complete (both
    replicas Ready: caches synced), as `kubectl rollout status` sees it. Its pods go with the
    cluster. (Of ``planning`` only the unready-slice timeout reaches the Deployment's flags.)"""
    deployment = None
    for obj in deployed_manifests(planning.unready_slice_timeout, namespaces):
        await cluster.apply(obj)
        if obj["kind"] == "Deployment":
            deployment = obj
    assert deployment is not None
    meta = deployment["metadata"]
    path = f"/apis/apps/v1/namespaces/{meta['namespace']}/deployments/{meta['name']}"
    wanted = await _rolled_out(cluster, path)
    log.info("operator deployed: %d replicas in namespace %s", wanted, meta["namespace"])
    hint(
        f"try: kubectl get deploy,pods -n {meta['namespace']}; "
        f"kubectl get lease -n {meta['namespace']}"
    )
    yield


async def _rolled_out(cluster: DevCluster, path: str) -> int:
    """Waits until the Deployment at ``path`` has every replica updated and available."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 180
    while True:
        current = await cluster.client.get(path)
        status = current.get("status") or {}
        wanted = int(current["spec"].get("replicas", 1))
        if (
            status.get("observedGeneration", 0) >= current["metadata"].get("generation", 1)
            and status.get("updatedReplicas") == wanted
            and status.get("availableReplicas") == wanted
        ):
            return wanted
        if loop.time() > deadline:
            raise RuntimeError(f"the operator Deployment did not become available: {status}")
        await asyncio.sleep(0.5)


async def _synced(manager: Any, task: asyncio.Task[None]) -> None:
    while not manager.synced():
        if task.done():
            task.result()  # the operator failed to start: say why
            raise RuntimeError("the operator stopped before its caches synced")
        await asyncio.sleep(0.05)
