"""A RayJob's lifecycle on the simulated runtime (stand-in Jobs API): suspend and resume the
way Kueue does, activeDeadlineSeconds, backoffLimit retries each on a new RayCluster,
clusterSelector, and every deletion policy (docs/design.md §11)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, rayjob, tpu_cluster_spec

from raycluster_operator.kube import EVENTS, PODS, RAYCLUSTERS, RAYJOBS
from tests.harness import control_planes
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]
HTTP: dict[str, Any] = {"submissionMode": "HTTPMode"}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(control_plane: str) -> AsyncIterator[RayJobWorld]:
    control_planes.require(control_plane)
    async with open_world(RayJobWorld, NODES, control_plane=control_plane) as w:
        yield w


async def running_job(world: RayJobWorld, ns: str, name: str) -> dict[str, Any]:
    """Running, with the stand-in's job submitted and seen RUNNING."""
    status = await world.until(ns, name, "Running")

    async def seen() -> None:
        assert (await world.status(ns, name)).get("jobStatus") == "RUNNING"

    await eventually(seen, 30)
    return status


async def gone(world: RayJobWorld, ns: str, cluster: str) -> None:
    async def check() -> None:
        assert not await world.cluster_exists(ns, cluster)

    await eventually(check, 30)


async def test_suspend_then_resume_runs_on_a_new_cluster(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("suspend")
    await world.apply(tmp_path, rayjob("held", ns, suspend=True, **HTTP))
    held = await world.until(ns, "held", "Suspended")
    assert "rayClusterName" not in held and held["jobStatus"] == ""
    listing = await world.kube.list(RAYCLUSTERS, ns)
    assert listing.items == []  # admitted by nobody yet: no cluster was created
    patch = '{"spec":{"suspend":false}}'
    kubectl = world.kubectl(tmp_path)
    assert (
        await kubectl("patch", "rayjob", "held", "-n", ns, "--type=merge", "-p", patch)
    ).returncode == 0
    first = await running_job(world, ns, "held")
    patch = '{"spec":{"suspend":true}}'
    assert (
        await kubectl("patch", "rayjob", "held", "-n", ns, "--type=merge", "-p", patch)
    ).returncode == 0
    await world.until(ns, "held", "Suspended")
    await gone(world, ns, first["rayClusterName"])
    patch = '{"spec":{"suspend":false}}'
    assert (
        await kubectl("patch", "rayjob", "held", "-n", ns, "--type=merge", "-p", patch)
    ).returncode == 0
    second = await running_job(world, ns, "held")
    assert second["rayClusterName"] != first["rayClusterName"]
    assert second["jobId"] != first["jobId"]
    reasons = [e["reason"] for e in await world.events(ns, "held")]
    assert reasons.count("Suspend") >= 2 and "Resume" in reasons


async def test_active_deadline_fails_with_deadline_exceeded(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("deadline")
    await world.apply(tmp_path, rayjob("slow", ns, activeDeadlineSeconds=3, backoffLimit=2, **HTTP))
    failed = await world.until(ns, "slow", "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    assert failed["failed"] == 1  # a deadline is never retried, whatever backoffLimit says


async def test_backoff_limit_retries_each_on_a_new_cluster(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("backoff")
    await world.apply(tmp_path, rayjob("flaky", ns, backoffLimit=2, **HTTP))
    clusters: list[str] = []
    for attempt in range(3):
        status = await running_job(world, ns, "flaky")
        assert status["rayClusterName"] not in clusters
        clusters.append(status["rayClusterName"])
        world.jobs_api.finish(status["jobId"], "FAILED", f"attempt {attempt}")
        if attempt < 2:
            await gone(world, ns, status["rayClusterName"])
    final = await world.until(ns, "flaky", "Failed")
    assert (final["failed"], final["reason"]) == (3, "AppFailed")
    reasons = [e["reason"] for e in await world.events(ns, "flaky")]
    assert reasons.count("Retry") == 2


async def test_cluster_selector_runs_on_an_existing_cluster(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("selector")
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "shared", "namespace": ns},
        "spec": tpu_cluster_spec(),
    }
    job = rayjob(
        "guest", ns, rayClusterSpec=None, clusterSelector={"ray.io/cluster": "shared"}, **HTTP
    )
    await world.apply(tmp_path, cluster, job)
    status = await running_job(world, ns, "guest")
    assert status["rayClusterName"] == "shared"
    world.jobs_api.finish(status["jobId"], "SUCCEEDED")
    await world.until(ns, "guest", "Complete")
    assert await world.cluster_exists(ns, "shared")
    # Its own cluster is never deleted: not even when the RayJob goes.
    assert (await world.kubectl(tmp_path)("delete", "rayjob", "guest", "-n", ns)).returncode == 0
    before = world.operators[0].manager.controllers["rayjob"].reconciles

    async def progressed() -> None:
        assert world.operators[0].manager.controllers["rayjob"].reconciles > before

    await eventually(progressed, 30)
    assert await world.cluster_exists(ns, "shared")


@pytest.mark.parametrize("policy", ["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone"])
async def test_deletion_policy(world: RayJobWorld, tmp_path: Path, policy: str) -> None:
    ns = await world.namespace(f"delete-{policy.lower()}")
    strategy = {"onSuccess": {"policy": policy}, "onFailure": {"policy": "DeleteNone"}}
    await world.apply(tmp_path, rayjob("done", ns, deletionStrategy=strategy, **HTTP))
    status = await running_job(world, ns, "done")
    cluster = status["rayClusterName"]
    world.jobs_api.finish(status["jobId"], "SUCCEEDED")
    if policy != "DeleteSelf":  # DeleteSelf (ttl 0) may delete it before a poll sees Complete
        await world.until(ns, "done", "Complete")
    if policy == "DeleteCluster":
        await gone(world, ns, cluster)
        assert (await world.status(ns, "done"))["jobDeploymentStatus"] == "Complete"
    elif policy == "DeleteWorkers":

        async def workers_gone() -> None:
            got = await world.kube.get(RAYCLUSTERS, ns, cluster)
            assert all(g.get("suspend") for g in got["spec"]["workerGroupSpecs"])
            pods = await world.kube.list(PODS, ns, label_selector=f"ray.io/cluster={cluster}")
            live = [p for p in pods.items if not p["metadata"].get("deletionTimestamp")]
            assert [p["metadata"]["labels"]["ray.io/node-type"] for p in live] == ["head"]

        await eventually(workers_gone, 30)
    elif policy == "DeleteSelf":

        async def self_gone() -> None:
            assert not await world.rayjob_exists(ns, "done")

        await eventually(self_gone, 30)
        await gone(world, ns, cluster)  # the garbage collector follows the owner reference
        events = await world.kube.list(EVENTS, ns)
        about = [(e.get("regarding") or e.get("involvedObject") or {}, e) for e in events.items]
        reasons = {e.get("reason") for who, e in about if who.get("name") == "done"}
        assert "JobEnded" in reasons, reasons  # it completed before it deleted itself
    else:
        before = world.operators[0].manager.controllers["rayjob"].reconciles
        await world.kube.patch(RAYJOBS, ns, "done", {"metadata": {"annotations": {"poke": "1"}}})

        async def progressed() -> None:
            assert world.operators[0].manager.controllers["rayjob"].reconciles > before

        await eventually(progressed, 30)
        assert await world.cluster_exists(ns, cluster)


async def test_deletion_rules_by_outcome_after_their_ttl(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("delete-rules")
    rules = [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 0}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 1}},
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
    ]
    await world.apply(
        tmp_path, rayjob("ruled", ns, deletionStrategy={"deletionRules": rules}, **HTTP)
    )
    status = await running_job(world, ns, "ruled")
    world.jobs_api.finish(status["jobId"], "FAILED")
    await world.until(ns, "ruled", "Failed")
    await gone(world, ns, status["rayClusterName"])  # the later, more impactful rule wins
    assert (await world.status(ns, "ruled"))["jobDeploymentStatus"] == "Failed"
