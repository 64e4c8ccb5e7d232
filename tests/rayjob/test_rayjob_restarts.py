"""A RayJob survives an operator crashed between its writes and a submitter cache that lags
(docs/design.md §11, rules on New, Submission and Retries): one RayCluster and one submitter
per attempt, every failure counted once, nothing submitted twice.

A private world for the module (crashes and faults of its own), a namespace per test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, assert_healed, rayjob

from raycluster_operator.builders.rayjob import submitter_job_id
from raycluster_operator.controller.rayjob.reconciler import RayJobReconciler
from raycluster_operator.kube import PODS, RAYCLUSTERS, RAYJOBS
from raycluster_operator.planning.rayjob import Plan
from tests.harness.objects import Obj
from tests.harness.operator import RunningOperator
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, NODES) as w:
        yield w


def stop_before_status(op: RunningOperator, target: str) -> asyncio.Event:
    """The operator's next pass that moves the RayJob to ``target`` executes its writes and
    then hangs before writing status (the test crashes it there); the event says it is there."""
    controller: RayJobReconciler = op.manager.rayjobs
    original = controller._write_status
    there = asyncio.Event()

    async def write(rayjob: Obj, plan: Plan) -> None:
        if any(move.target.value == target for move in plan.moves):
            there.set()
            await asyncio.Event().wait()
        await original(rayjob, plan)

    controller._write_status = write  # type: ignore[method-assign]
    return there


async def crash_at(world: RayJobWorld, target: str) -> None:
    """Crash the operator between the writes of the pass moving to ``target`` and its status
    write, then start a fresh one."""
    there = stop_before_status(world.operators[-1], target)
    await asyncio.wait_for(there.wait(), 60)
    await world.restart()


async def names(world: RayJobWorld, resource: Any, ns: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in (await world.kube.list(resource, ns)).items)


async def test_crashes_between_writes_duplicate_and_lose_nothing(world: RayJobWorld) -> None:
    ns = await world.namespace("crashes")
    await world.kube.create(RAYJOBS, rayjob("pi", ns, backoffLimit=1), ns)
    # 1. After the submitter is created, before Running is written.
    await crash_at(world, "Running")
    created = await world.submitter(ns, "pi")
    assert created is not None
    first = await world.until(ns, "pi", "Running")
    assert (await world.submitter(ns, "pi") or {})["metadata"]["uid"] == created["metadata"]["uid"]
    assert await names(world, RAYCLUSTERS, ns) == [first["rayClusterName"]]
    # 2. The attempt fails (the app); the crash comes after its cluster and submitter are
    #    deleted, before Retrying -> New is written.
    world.jobs_api.start_job(first["jobId"])
    world.jobs_api.finish(first["jobId"], "FAILED")
    await world.submitter_ran(ns, "pi")
    await crash_at(world, "")
    second = await world.until(ns, "pi", "Running")
    assert second["failed"] == 1 and second["jobId"] != first["jobId"]
    assert await names(world, RAYCLUSTERS, ns) == [second["rayClusterName"]]
    # 3. The second attempt succeeds: one success, one failure, as it happened.
    await _succeeds_on_its_own_submitter(world, ns, "pi", second)


async def test_a_resubmission_waits_out_a_stale_submitter_cache(world: RayJobWorld) -> None:
    """The submitter informer's watch is cut and cannot come back while a broken slice makes
    the job resubmit: the deleted submitter of the first submission stays in the cache. The
    healed cluster gets no submitter until the cache shows the old one gone, and then one for
    the new submission id (before: the stale one was taken for it and nothing submitted)."""
    ns = await world.namespace("stale-submitter")
    first = await _training(world, ns, "K8sJobMode")
    before = first["rayClusterStatus"]
    faults = world.cluster.faults
    rules = [faults.fail("list", "jobs"), faults.fail("watch", "jobs")]
    faults.drop_watches()
    await world.kube.delete(PODS, ns, await _host_pod(world, ns, first["rayClusterName"]))
    await eventually(lambda: _waits_on_a_healed_cluster(world, ns, first["jobId"], before), 60)
    assert await world.submitter(ns, "train") is None  # deleted, but still in the cache
    for rule in rules:
        faults.rules.remove(rule)
    again = await world.until(ns, "train", "Running")
    assert again["failed"] == 1 and again["rayClusterName"] == first["rayClusterName"]
    await _succeeds_on_its_own_submitter(world, ns, "train", again)


async def test_a_resubmission_waits_for_the_healed_slice_not_the_status(
    world: RayJobWorld,
) -> None:
    """The RayCluster's status cannot be written while a slice breaks and heals, so it reads
    ready throughout (as it does, more briefly, whenever its controller lags the pods). The
    resubmission waits for the pods themselves: it lands on the whole, healed slice, not on
    the broken one (before: submitted at once, on a terminating host)."""
    ns = await world.namespace("stale-cluster-status")
    first = await _training(world, ns, "HTTPMode")
    cluster = first["rayClusterName"]
    before = {p["metadata"]["uid"] for p in await world.workers(ns, cluster)}
    landed_on = world.workers_at_submission(ns, cluster)
    rule = world.cluster.faults.fail("patch", "rayclusters/status")
    try:
        await world.kube.delete(PODS, ns, await _host_pod(world, ns, cluster))
        await eventually(lambda: _resubmitted(world, ns, first["jobId"]), 60)
    finally:
        world.cluster.faults.rules.remove(rule)
        world.jobs_api.on_submit = None
    again = await world.status(ns, "train")
    assert again["failed"] == 1 and again["rayClusterName"] == cluster
    assert_healed(landed_on[again["jobId"]], before)
    world.jobs_api.finish(again["jobId"], "SUCCEEDED")
    final = await world.until(ns, "train", "Complete")
    assert (final["succeeded"], final["failed"]) == (1, 1)


async def test_a_crash_during_a_resubmission_resubmits_and_counts_once(
    world: RayJobWorld,
) -> None:
    """The operator dies after the pass that found the break stopped the Ray job, before it
    wrote Running -> Initializing: the next operator finds the break again (unrecorded) and
    resubmits once, with one failure counted and one record of the break."""
    ns = await world.namespace("crash-resubmit")
    first = await _training(world, ns, "HTTPMode")
    submitted = len(world.jobs_api.submissions)
    there = stop_before_status(world.operators[-1], "Initializing")
    await world.kube.delete(PODS, ns, await _host_pod(world, ns, first["rayClusterName"]))
    await asyncio.wait_for(there.wait(), 60)
    assert first["jobId"] in world.jobs_api.stops
    await world.restart()
    await eventually(lambda: _resubmitted(world, ns, first["jobId"]), 60)
    again = await world.status(ns, "train")
    assert (again["failed"], len(again["sliceFailures"])) == (1, 1)
    new = [s["submission_id"] for s in world.jobs_api.submissions[submitted:]]
    assert new == [again["jobId"]]
    world.jobs_api.finish(again["jobId"], "SUCCEEDED")
    final = await world.until(ns, "train", "Complete")
    assert (final["succeeded"], final["failed"]) == (1, 1)


async def _succeeds_on_its_own_submitter(
    world: RayJobWorld, ns: str, name: str, attempt: Obj
) -> None:
    """The submitter is this attempt's (built for its job id), and the attempt runs to
    success: one success and one failure in all."""
    submitter = await world.submitter(ns, name)
    assert submitter is not None and submitter_job_id(submitter) == attempt["jobId"]
    world.jobs_api.start_job(attempt["jobId"])
    world.jobs_api.finish(attempt["jobId"], "SUCCEEDED")
    await world.submitter_ran(ns, name)
    final = await world.until(ns, name, "Complete")
    assert (final["succeeded"], final["failed"]) == (1, 1)


async def _resubmitted(world: RayJobWorld, ns: str, first_id: str) -> None:
    status = await world.status(ns, "train")
    assert status["jobDeploymentStatus"] == "Running" and status["jobId"] != first_id, status
    assert status["jobId"] in world.jobs_api.jobs, status


async def _training(world: RayJobWorld, ns: str, mode: str) -> Obj:
    """The RayJob "train" (Resubmit, one retry) with its Ray job running: its status."""
    spec = {"sliceFailurePolicy": "Resubmit", "backoffLimit": 1, "submissionMode": mode}
    await world.kube.create(RAYJOBS, rayjob("train", ns, **spec), ns)
    first = await world.until(ns, "train", "Running")
    if mode == "K8sJobMode":  # the submitter's part; in HTTPMode the operator submits
        world.jobs_api.start_job(first["jobId"])
    await eventually(lambda: _job_started(world, ns), 30)
    return await world.status(ns, "train")


async def _job_started(world: RayJobWorld, ns: str) -> None:
    assert (await world.status(ns, "train")).get("rayJobInfo")


async def _host_pod(world: RayJobWorld, ns: str, cluster: str) -> str:
    selector = f"ray.io/cluster={cluster},ray.io/replica-host-index=1"
    (pod,) = (await world.kube.list(PODS, ns, label_selector=selector)).items
    return str(pod["metadata"]["name"])


async def _waits_on_a_healed_cluster(
    world: RayJobWorld, ns: str, first_id: str, before: Obj
) -> None:
    """Resubmitted (a new id), and a pass has since seen the healed cluster ready: its
    mirror of the cluster's status is ready and newer than the one before the break."""
    status = await world.status(ns, "train")
    assert status["jobId"] != first_id and status.get("failed") == 1, status
    mirrored = status.get("rayClusterStatus") or {}
    assert mirrored.get("state") == "ready" and mirrored.get("readyWorkerSlices") == 1, status
    assert mirrored.get("lastUpdateTime") != before.get("lastUpdateTime"), status
    assert status["jobDeploymentStatus"] == "Initializing", status
