"""RayServices on the simulated runtime, driven with the real kubectl; a stand-in answers the
Serve API where no Ray runs, and the test plays Serve's application status, as KubeRay's tests
drive a fake dashboard (docs/design.md §12)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from rayservice_world import (
    NODES,
    SERVE_CONFIG,
    RayServiceWorld,
    cluster_config,
    rayservice,
    serve_labels,
)

from tests.harness import control_planes
from tests.harness.objects import Obj
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(control_plane: str) -> AsyncIterator[RayServiceWorld]:
    control_planes.require(control_plane)
    async with open_world(RayServiceWorld, NODES, control_plane=control_plane) as w:
        yield w


def _ready(status: Obj) -> None:
    assert status.get("serviceStatus") == "Running", status.get("conditions")


async def _serving(world: RayServiceWorld, ns: str, name: str) -> str:
    """Until the first cluster is deployed to, then RUNNING: the cluster serving."""

    def named(status: Obj) -> None:
        assert (status.get("pendingServiceStatus") or {}).get("rayClusterName"), status  # type: ignore[union-attr]

    status = await world.until(ns, name, named)
    cluster = str(status["pendingServiceStatus"]["rayClusterName"])  # type: ignore[index]

    async def deployed() -> None:
        assert world.serve.deployed.get(cluster), "nothing deployed yet"

    await eventually(deployed, 60)
    world.serve.set_status(cluster, "RUNNING")
    await world.until(ns, name, _ready)
    return cluster


async def test_a_service_serves_from_whole_slices(world: RayServiceWorld, tmp_path: Path) -> None:
    ns = await world.namespace("serves")
    kubectl = world.kubectl(tmp_path)
    await world.apply(tmp_path, rayservice("llm", ns))
    cluster = await _serving(world, ns, "llm")
    assert cluster.startswith("llm-")

    def mirrored(status: Obj) -> None:
        # The switch reads the pods; the mirrored RayCluster status is copied on the pass
        # after the RayCluster controller writes it, as `kubectl get` shows a moment later.
        ready = status["activeServiceStatus"].get("rayClusterStatus", {})
        assert ready.get("readyWorkerSlices") == 1, ready

    status = await world.until(ns, "llm", mirrored)
    active = status["activeServiceStatus"]
    assert active["rayClusterName"] == cluster and not status.get("pendingServiceStatus")
    app = active["applicationStatuses"]["llm"]
    assert app["status"] == "RUNNING"
    assert app["serveDeploymentStatuses"]["Model"]["status"] == "HEALTHY"
    assert active["rayClusterStatus"]["readyWorkerSlices"] == 1
    # Head (healthy proxy) and both hosts of the whole slice are behind the serve service.
    assert status["numServeEndpoints"] == 3
    assert serve_labels(await world.pods_of(ns, cluster)) == {
        "head": "true",
        "tpu-0/0": "true",
        "tpu-0/1": "true",
    }
    svc = await world.service(ns, "llm-serve-svc")
    assert svc is not None
    assert svc["spec"]["selector"] == {"ray.io/cluster": cluster, "ray.io/serve": "true"}
    assert svc["spec"]["ports"] == [
        {"name": "serve", "port": 8000, "protocol": "TCP", "targetPort": 8000}
    ]
    # The RayService's own head service: the serving cluster's head, under the service's name
    # (KubeRay's `<name>-head-svc`), read as a user would.
    head_svc = json.loads(
        (await kubectl("get", "svc", "llm-head-svc", "-n", ns, "-o", "json")).stdout
    )
    assert head_svc["spec"]["selector"] == {"ray.io/cluster": cluster, "ray.io/node-type": "head"}
    assert head_svc["metadata"]["labels"] == {
        "ray.io/originated-from-cr-name": "llm",
        "ray.io/originated-from-crd": "RayService",
        "ray.io/node-type": "head",
        "ray.io/identifier": "llm-head",
    }
    assert head_svc["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert {p["name"] for p in head_svc["spec"]["ports"]} >= {"dashboard", "serve"}
    (config,) = world.serve.deployed[cluster]
    assert config["applications"][0]["import_path"] == "serve_app:app"
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert conditions == {
        "Ready": ("True", "NonZeroServeEndpoints"),
        "UpgradeInProgress": ("False", "NoPendingCluster"),
    }
    table = (await kubectl("get", "rayservice", "llm", "-n", ns)).stdout.splitlines()
    assert table[0].split()[:6] == ["NAME", "SERVICE", "STATUS", "NUM", "SERVE", "ENDPOINTS"]
    assert table[1].split()[:3] == ["llm", "Running", "3"]
    # A serveConfigV2 change rolls in place: deployed again to the same cluster, no new one.
    changed = SERVE_CONFIG.replace("serve_app:app", "serve_app:app_v2")
    done = await kubectl(
        "patch",
        "rayservice",
        "llm",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec": {"serveConfigV2": ' + _json(changed) + "}}",
    )
    assert done.returncode == 0, done.stderr

    async def redeployed() -> None:
        assert len(world.serve.deployed[cluster]) == 2

    await eventually(redeployed, 30)
    assert world.serve.deployed[cluster][1]["applications"][0]["import_path"] == "serve_app:app_v2"
    await world.served(ns, "llm")
    assert await world.clusters(ns) == [cluster]
    await world.delete(ns, "llm")


async def test_new_cluster_upgrade_switches_once_apps_run(
    world: RayServiceWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("upgrade")
    await world.apply(tmp_path, rayservice("web", ns))
    old = await _serving(world, ns, "web")
    new_image = rayservice(
        "web", ns, rayClusterConfig=cluster_config(image="rayproject/ray:2.60.1")
    )
    await world.apply(tmp_path, new_image)

    def upgrading(status: Obj) -> None:
        pending = status.get("pendingServiceStatus") or {}
        assert pending.get("rayClusterName"), status  # type: ignore[union-attr]

    status = await world.until(ns, "web", upgrading)
    new = str(status["pendingServiceStatus"]["rayClusterName"])  # type: ignore[index]
    assert new != old
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}  # type: ignore[union-attr]
    assert conditions["UpgradeInProgress"] == ("True", "BothActivePendingClustersExist")

    async def deployed() -> None:
        pods = [
            (p["metadata"]["name"], p["status"].get("phase")) for p in await world.pods_of(ns, new)
        ]
        assert world.serve.deployed.get(new), (await world.clusters(ns), pods)

    await eventually(deployed, 60)
    # The application stays unhealthy on the new cluster: traffic stays on the old one.
    world.serve.set_status(new, "UNHEALTHY", "replica crashed: CUDA out of memory")

    def unhealthy(status: Obj) -> None:
        # Waited for, not read after the barrier: a status write of a pass that overlapped
        # the barrier's may be refused (Conflict) and land a pass later.
        apps = (status.get("pendingServiceStatus") or {}).get("applicationStatuses") or {}  # type: ignore[union-attr]
        assert apps.get("llm") == {
            "status": "UNHEALTHY",
            "message": "replica crashed: CUDA out of memory",
            "serveDeploymentStatuses": {
                "Model": {"status": "UNHEALTHY", "message": "replica crashed: CUDA out of memory"}
            },
        }, apps

    await world.until(ns, "web", unhealthy)
    await world.served(ns, "web")
    status = await world.status(ns, "web")
    assert status["activeServiceStatus"]["rayClusterName"] == old
    svc = await world.service(ns, "web-serve-svc")
    assert svc is not None and svc["spec"]["selector"]["ray.io/cluster"] == old
    head_svc = await world.service(ns, "web-head-svc")
    assert head_svc is not None and head_svc["spec"]["selector"]["ray.io/cluster"] == old
    assert status["serviceStatus"] == "Running" and status["numServeEndpoints"] == 3
    # Serve recovers: the switch, the old cluster deleted (rayClusterDeletionDelaySeconds 0).
    world.serve.set_status(new, "RUNNING")

    def switched(status: Obj) -> None:
        assert status["activeServiceStatus"]["rayClusterName"] == new, status  # type: ignore[index]
        assert not status.get("pendingServiceStatus")

    status = await world.until(ns, "web", switched)
    svc = await world.service(ns, "web-serve-svc")
    assert svc is not None and svc["spec"]["selector"]["ray.io/cluster"] == new
    head_svc = await world.service(ns, "web-head-svc")  # moved with the traffic
    assert head_svc is not None and head_svc["spec"]["selector"]["ray.io/cluster"] == new

    async def old_gone() -> None:
        assert await world.clusters(ns) == [new]

    await eventually(old_gone, 30)

    async def told() -> None:
        # An Event is written after the write it tells of: the cluster can be gone a moment
        # before its DeletedRayCluster Event is.
        reasons = [e["reason"] for e in await world.events(ns, "web")]
        for reason in (
            "CreatedRayCluster",
            "UpdatedServeApplications",
            "UpdatedService",
            "DeletedRayCluster",
        ):
            assert reason in reasons, reasons

    await eventually(told, 30)
    await world.delete(ns, "web")


async def test_upgrade_none_keeps_the_cluster(world: RayServiceWorld, tmp_path: Path) -> None:
    ns = await world.namespace("noupgrade")
    body = rayservice("keep", ns, upgradeStrategy={"type": "None"})
    await world.apply(tmp_path, body)
    cluster = await _serving(world, ns, "keep")
    changed = rayservice(
        "keep",
        ns,
        upgradeStrategy={"type": "None"},
        rayClusterConfig=cluster_config(image="rayproject/ray:2.60.1"),
    )
    await world.apply(tmp_path, changed)
    await world.served(ns, "keep")
    status = await world.status(ns, "keep")
    assert not status.get("pendingServiceStatus")
    assert await world.clusters(ns) == [cluster]
    await world.delete(ns, "keep")


async def test_incremental_upgrade_is_refused_without_the_gateway_api(
    world: RayServiceWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("incremental")
    options = {"gatewayClassName": "istio", "stepSizePercent": 10, "intervalSeconds": 30}
    strategy = {"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": options}
    await world.apply(tmp_path, rayservice("inc", ns, upgradeStrategy=strategy))

    def refused(status: Obj) -> None:
        # Asserted, not unpacked: the first reads may find no condition yet (on Kubernetes'
        # control plane they do), and only an AssertionError means "not yet".
        ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]  # type: ignore[union-attr,index]
        assert len(ready) == 1 and ready[0]["reason"] == "ValidationFailed", ready

    status = await world.until(ns, "inc", refused)
    (ready,) = status["conditions"]  # type: ignore[misc]
    assert "needs the Gateway API (gateway.networking.k8s.io)" in ready["message"]
    assert await world.clusters(ns) == []
    warnings = [e for e in await world.events(ns, "inc") if e["reason"] == "InvalidRayServiceSpec"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning"
    await world.delete(ns, "inc")


async def test_a_broken_slice_leaves_the_endpoints_alone(
    world: RayServiceWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("broken")
    await world.apply(tmp_path, rayservice("two", ns, rayClusterConfig=cluster_config(replicas=2)))
    cluster = await _serving(world, ns, "two")

    def five(status: Obj) -> None:
        assert status["numServeEndpoints"] == 5, status.get("numServeEndpoints")

    await world.until(ns, "two", five)
    pods = await world.pods_of(ns, cluster)
    victim = next(
        p
        for p in pods
        if p["metadata"]["labels"].get("replicaIndex") == "tpu-1"
        and p["metadata"]["labels"]["ray.io/replica-host-index"] == "1"
    )
    # Ray fails on host 1 of slice tpu-1: its readiness probe fails, and keeps failing until
    # the test lets it pass. (A container that exits is restarted at once; a slice unready for
    # less than one pass may never be seen, which is right, but proves nothing.)
    await world.cluster.set_ready(ns, victim["metadata"]["name"], False)
    # Slice tpu-1 leaves the serve service (its survivor is labelled false too);
    # the head and slice tpu-0 keep serving throughout.

    async def out_of_service() -> None:
        labels_now = serve_labels(await world.pods_of(ns, cluster))
        # The healthy host of the broken slice too: its replica spans the slice.
        assert labels_now["tpu-1/0"] == labels_now["tpu-1/1"] == "false", labels_now
        assert labels_now["tpu-0/0"] == labels_now["tpu-0/1"] == labels_now["head"] == "true"
        notes = [e["note"] for e in await world.events(ns, "two")]
        assert any("slice tpu-1 is" in n and "leave the serve service" in n for n in notes)

    await eventually(out_of_service, 30)

    def three(status: Obj) -> None:
        assert status["numServeEndpoints"] == 3, status.get("numServeEndpoints")

    await world.until(ns, "two", three)
    # The probe passes again: the slice is whole, it joins, and all five endpoints are back.
    await world.cluster.set_ready(ns, victim["metadata"]["name"], True)

    async def healed() -> None:
        now = await world.pods_of(ns, cluster)
        assert serve_labels(now) == dict.fromkeys(
            ["head", "tpu-0/0", "tpu-0/1", "tpu-1/0", "tpu-1/1"], "true"
        )

    await eventually(healed, 60)
    await world.until(ns, "two", five)
    events = [e for e in await world.events(ns, "two") if e["reason"].startswith("Slice")]
    assert any(e["reason"] == "SliceServing" and "tpu-1" in e["note"] for e in events), events
    await world.delete(ns, "two")


async def test_a_slice_host_without_a_serve_proxy_stays_out_and_the_slice_serves(
    world: RayServiceWorld, tmp_path: Path
) -> None:
    """A Serve replica that reserves a whole slice runs its actor on one host, and Serve runs
    a proxy only there (RS4): host 1 has no proxy. Its readiness is the raylet's, so the
    slice is whole and the service switches to it; host 1 stays out of the serve service
    while host 0, whose proxy answers, is in."""
    ns = await world.namespace("oneproxy")
    world.serve.unhealthy_proxies.add("spanned-0-1")
    try:
        config = cluster_config(group="spanned")
        await world.apply(tmp_path, rayservice("span", ns, rayClusterConfig=config))
        cluster = await _serving(world, ns, "span")

        def two(status: Obj) -> None:
            assert status["numServeEndpoints"] == 2, status.get("numServeEndpoints")
            mirrored = status["activeServiceStatus"].get("rayClusterStatus", {})
            assert mirrored.get("readyWorkerSlices") == 1, mirrored

        await world.until(ns, "span", two)
        await world.served(ns, "span")
        status = await world.status(ns, "span")
        pods = await world.pods_of(ns, cluster)
        assert all(_pod_ready(p) for p in pods), [p["status"] for p in pods]
        assert serve_labels(pods) == {"head": "true", "spanned-0/0": "true", "spanned-0/1": "false"}
        # Host 1 was asked and said no: out for its own proxy, not for want of asking.
        assert {"spanned-0-0", "spanned-0-1"} <= world.serve.proxies_asked[cluster]
        assert status["numServeEndpoints"] == 2 and status["serviceStatus"] == "Running"
        conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
        assert conditions["Ready"] == ("True", "NonZeroServeEndpoints")
        svc = await world.service(ns, "span-serve-svc")
        assert svc is not None and svc["spec"]["selector"]["ray.io/cluster"] == cluster
        # Serve places a replica on host 1: its proxy answers and it joins.
        world.serve.unhealthy_proxies.discard("spanned-0-1")

        def three(status: Obj) -> None:
            assert status["numServeEndpoints"] == 3, status.get("numServeEndpoints")

        await world.until(ns, "span", three)
        # Host 0's replica goes: it leaves alone; the slice is whole, so no slice Event.
        world.serve.unhealthy_proxies.add("spanned-0-0")
        await world.until(ns, "span", two)
        assert serve_labels(await world.pods_of(ns, cluster)) == {
            "head": "true",
            "spanned-0/0": "false",
            "spanned-0/1": "true",
        }
        reasons = [e["reason"] for e in await world.events(ns, "span")]
        assert "SliceNotServing" not in reasons, reasons
    finally:
        world.serve.unhealthy_proxies.difference_update({"spanned-0-0", "spanned-0-1"})
    await world.delete(ns, "span")


def _pod_ready(pod: Obj) -> bool:
    conditions = pod["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _json(text: str) -> str:
    import json

    return json.dumps(text)
