"""RayJob passes that fail get the runtime's handling, as RayCluster passes do
(docs/design.md §7, §11): a refusal is recorded and waits for a change, a bug is logged with
its traceback, counted and retried with backoff."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, rayjob

from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, NODES) as w:
        yield w


def rayjob_metric(world: RayJobWorld, name: str, **labels: str) -> float:
    registry = world.operators[-1].manager.metrics.registry
    return registry.get_sample_value(f"raycluster_operator_rayjob_{name}", labels) or 0.0


async def test_a_refused_cluster_create_is_recorded_on_the_rayjob_and_waits_for_a_change(
    world: RayJobWorld, tmp_path: Path
) -> None:
    ns = await world.namespace("refused")
    kubectl = world.kubectl(tmp_path)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-clusters", "namespace": ns},
        "spec": {"hard": {"count/rayclusters.ray.io": "0"}},
    }
    await world.apply(tmp_path, quota)
    await world.apply(tmp_path, rayjob("denied", ns))

    async def rejected() -> None:
        reasons = [e["reason"] for e in await world.events(ns, "denied")]
        assert "WriteRejected" in reasons, reasons

    await eventually(rejected, 30)
    listed = await kubectl(
        "get", "events", "-n", ns, "--field-selector", "reason=WriteRejected", "-o", "name"
    )
    assert listed.returncode == 0 and listed.stdout.strip(), listed.stderr
    (event,) = [e for e in await world.events(ns, "denied") if e["reason"] == "WriteRejected"]
    assert event["type"] == "Warning" and "quota" in event["note"]
    assert rayjob_metric(world, "reconcile_total", result="terminal") >= 1
    assert rayjob_metric(world, "reconcile_errors_total") >= 1
    # Stopped, not retried hot: the key's backoff was reset, no retry is pending.
    queue = world.operators[-1].manager.controllers["rayjob"].queue
    assert queue is not None and queue.num_requeues(f"{ns}/denied") == 0
    # The user lifts the quota and touches the RayJob: that change runs it.
    assert (await kubectl("delete", "resourcequota", "no-clusters", "-n", ns)).returncode == 0
    touched = await kubectl("annotate", "rayjob", "denied", "-n", ns, "retry=1")
    assert touched.returncode == 0, touched.stderr
    running = await world.until(ns, "denied", "Running")
    assert await world.cluster_exists(ns, running["rayClusterName"])


async def test_a_bug_in_a_rayjob_pass_is_logged_with_its_traceback_counted_and_backed_off(
    world: RayJobWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raycluster_operator")
    reconciler = world.operators[-1].manager.rayjobs
    original = reconciler.clock

    def broken() -> datetime:
        raise RuntimeError("clock fell off the wall")

    errors = rayjob_metric(world, "reconcile_errors_total")
    ns = await world.namespace("buggy")
    reconciler.clock = broken
    try:
        await world.apply(tmp_path, rayjob("bug", ns))

        async def retried() -> None:
            key = f"{ns}/bug"
            failed = [r for r in caplog.records if key in r.getMessage() and r.exc_info]
            assert len(failed) >= 2, [r.getMessage() for r in caplog.records]

        await eventually(retried, 30)
    finally:
        reconciler.clock = original
    (record, *_) = [r for r in caplog.records if f"{ns}/bug" in r.getMessage() and r.exc_info]
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert "clock fell off the wall" in record.getMessage()
    assert rayjob_metric(world, "reconcile_errors_total") >= errors + 2
    assert "retry in" in record.getMessage()  # backed off, not dropped
    # Once the bug is gone the RayJob runs, from the backoff's retry alone.
    await world.until(ns, "bug", "Running")
