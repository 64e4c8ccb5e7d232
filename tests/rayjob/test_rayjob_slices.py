"""A worker slice that breaks while a RayJob runs, under each sliceFailurePolicy (an
EXTENSION, docs/design.md §11): LeaveToRay records it and keeps running on the healed
cluster; Resubmit stops the Ray job and submits a new one once every slice is ready again,
counted against backoffLimit; FailJob fails the RayJob. Each records the slice, host and node
in status and in a Warning Event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, assert_healed, rayjob

from raycluster_operator.kube import PODS
from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, NODES) as w:
        yield w


async def start(world: RayJobWorld, tmp: Path, ns: str, **spec: Any) -> dict[str, Any]:
    await world.apply(tmp, rayjob("train", ns, submissionMode="HTTPMode", **spec))
    await world.until(ns, "train", "Running")

    async def job_running() -> None:
        status = await world.status(ns, "train")
        assert status.get("jobStatus") == "RUNNING" and status.get("rayJobInfo")

    await eventually(job_running, 30)
    return await world.status(ns, "train")


async def break_a_host(world: RayJobWorld, tmp: Path, ns: str, cluster: str) -> dict[str, Any]:
    """Delete the host-1 pod of the cluster's slice, as a node failure would take it."""
    pods = await world.kube.list(
        PODS, ns, label_selector=f"ray.io/cluster={cluster},ray.io/replica-host-index=1"
    )
    (pod,) = pods.items
    name = pod["metadata"]["name"]
    done = await world.kubectl(tmp)("delete", "pod", name, "-n", ns, "--wait=false")
    assert done.returncode == 0, done.stderr
    return pod


async def recorded(world: RayJobWorld, ns: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    async def check() -> None:
        found[:] = (await world.status(ns, "train")).get("sliceFailures") or []
        assert found

    await eventually(check, 30)
    return found


def assert_names_the_slice(record: dict[str, Any], pod: dict[str, Any], action: str) -> None:
    assert (record["group"], record["slice"], record["action"]) == ("tpu", "tpu-0", action)
    if record["pod"]:  # seen while terminating; else seen replaced (the pod already gone)
        assert (record["pod"], record["host"]) == (pod["metadata"]["name"], "1")
        assert record["node"] == pod["spec"]["nodeName"]
        assert record["reason"] == "Deleted"
    else:
        assert record["reason"] == "Replaced"


async def test_leave_to_ray_records_and_keeps_running(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("slice-leave")
    status = await start(world, tmp_path, ns)
    pod = await break_a_host(world, tmp_path, ns, status["rayClusterName"])
    (record,) = await recorded(world, ns)
    assert_names_the_slice(record, pod, "LeftToRay")
    now = await world.status(ns, "train")
    assert (now["jobDeploymentStatus"], now["jobId"]) == ("Running", status["jobId"])
    assert world.jobs_api.stops == []
    events = [e for e in await world.events(ns, "train") if e["reason"] == "SliceBroken"]
    assert events and events[0]["type"] == "Warning" and "tpu-0" in events[0]["note"]
    world.jobs_api.finish(status["jobId"], "SUCCEEDED")
    assert (await world.until(ns, "train", "Complete"))["failed"] == 0


async def test_resubmit_stops_and_resubmits_on_the_healed_cluster(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("slice-resubmit")
    status = await start(world, tmp_path, ns, sliceFailurePolicy="Resubmit", backoffLimit=1)
    first = status["jobId"]
    before = {p["metadata"]["uid"] for p in await world.workers(ns, status["rayClusterName"])}
    landed_on = world.workers_at_submission(ns, status["rayClusterName"])
    pod = await break_a_host(world, tmp_path, ns, status["rayClusterName"])
    (record,) = await recorded(world, ns)
    assert_names_the_slice(record, pod, "Resubmitted")
    again = await world.until(ns, "train", "Running")

    async def resubmitted() -> None:
        ids = [s["submission_id"] for s in world.jobs_api.submissions]
        assert first in world.jobs_api.stops and ids[-1] != first
        assert ids[-1] == (await world.status(ns, "train"))["jobId"]

    await eventually(resubmitted, 30)
    assert again["rayClusterName"] == status["rayClusterName"]  # the healed cluster, kept
    assert again["failed"] == 1  # counted against backoffLimit
    assert world.jobs_api.jobs[first]["status"] == "STOPPED"
    second = (await world.status(ns, "train"))["jobId"]
    # Submitted again only once every slice was ready again: the pods it landed on, as they
    # were when the operator submitted (the RayJob's copy of the cluster's status is only as
    # new as the RayCluster controller's last write, and may say either).
    assert_healed(landed_on[second], before)
    world.jobs_api.on_submit = None
    await eventually(lambda: _job_running(world, ns), 30)
    world.jobs_api.finish(second, "SUCCEEDED")
    final = await world.until(ns, "train", "Complete")
    assert (final["succeeded"], final["failed"]) == (1, 1)


async def _job_running(world: RayJobWorld, ns: str) -> None:
    assert (await world.status(ns, "train")).get("jobStatus") == "RUNNING"


async def test_fail_job_fails_the_rayjob(world: RayJobWorld, tmp_path: Path) -> None:
    ns = await world.namespace("slice-fail")
    status = await start(world, tmp_path, ns, sliceFailurePolicy="FailJob", backoffLimit=3)
    pod = await break_a_host(world, tmp_path, ns, status["rayClusterName"])
    failed = await world.until(ns, "train", "Failed")
    assert failed["reason"] == "SliceFailed" and "tpu-0" in failed["message"]
    assert failed["failed"] == 1  # not retried, whatever backoffLimit allows
    (record,) = failed["sliceFailures"]
    assert_names_the_slice(record, pod, "FailedJob")
    assert status["jobId"] in world.jobs_api.stops
