"""Crash-loop backoff per slice (docs/design.md §4 rule 13a) on the dev cluster, as a user sees
it with kubectl: a worker whose command exits at once makes its slice break again and again;
its re-creations are spaced by a doubling wait (short values here: 1 s up to 4 s), the wait is
in the RayCluster's annotation, status and Events, a fixed template ends it at once, the
autoscaler's requests still act meanwhile, and a restarted operator keeps waiting."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kuberay_crd import kuberay_crd
from parity_kubectl import Kubectl

from kubefacts.timestamps import parse_time
from tests.harness.operator_world import (
    World,
    cpu_group,
    eventually,
    raycluster,
    ready,
    running_world,
)

ANNOTATION = "raycluster-operator.io/slice-backoff"
REPLICA_NAME = "ray.io/worker-group-replica-name"
REPLICA_INDEX = "ray.io/worker-group-replica-index"
#: The user's own command runs before `ray start`; this one ends the container at once.
BAD = {"command": ["exit 3"]}


def crashing_group(name: str = "g", *, replicas: int = 1, bad: bool = True, **extra: Any) -> Any:
    group = cpu_group(name, replicas=replicas, hosts=2, **extra)
    spec = group["template"]["spec"]
    spec["restartPolicy"] = "Never"  # a Ray container that ends fails its pod (KubeRay's rule)
    if bad:
        spec["containers"][0] |= BAD
    return group


class SliceLog:
    """Every slice of a cluster the API ever showed, with when it was first seen (polled)."""

    def __init__(self, world: World, cluster: str) -> None:
        self.world, self.cluster = world, cluster
        self.first_seen: dict[str, tuple[float, int]] = {}

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            for pod in await self.world.pods(self.cluster, live=False):
                lbl = pod["metadata"]["labels"]
                name = lbl.get(REPLICA_NAME)
                if name and name not in self.first_seen:
                    self.first_seen[name] = (loop.time(), int(lbl.get(REPLICA_INDEX, "-1")))
            await asyncio.sleep(0.05)

    def times(self, index: int = 0) -> list[float]:
        return sorted(t for t, i in self.first_seen.values() if i == index)


@contextlib.asynccontextmanager
async def logging_slices(world: World, cluster: str) -> AsyncIterator[SliceLog]:
    log = SliceLog(world, cluster)
    task = asyncio.create_task(log.watch())
    try:
        yield log
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def record(kubectl: Kubectl, cluster: str) -> dict[str, Any]:
    """The backoff records, as `kubectl get raycluster -o json` shows the annotation."""
    obj = await kubectl.json("get", "raycluster", cluster)
    text = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
    return json.loads(text) if text else {}


async def waiting(kubectl: Kubectl, cluster: str) -> list[dict[str, Any]]:
    """`status.workerGroups[0].backoff`: the indices waiting out a backoff."""
    obj = await kubectl.json("get", "raycluster", cluster)
    groups = (obj.get("status") or {}).get("workerGroups") or [{}]
    entries: list[dict[str, Any]] = groups[0].get("backoff") or []
    return entries


async def events(kubectl: Kubectl, reason: str) -> list[dict[str, Any]]:
    listing = await kubectl.json("get", "events", "--field-selector", f"reason={reason}")
    items: list[dict[str, Any]] = listing["items"]
    return items


async def crash_loop_until(world: World, name: str, slices: int) -> list[float]:
    """Apply a one-slice cluster whose command exits at once; the times its first ``slices``
    slices appeared, from the first. Counted, not timed: how many slices a window holds
    depends on how fast the machine is, the waits between them do not (issue #36)."""
    await world.apply(raycluster(name, [crashing_group()]))
    async with logging_slices(world, name) as log:
        # A hang guard only: each slice waits at most 4 s here.
        await eventually(lambda: _check(len(log.times()) >= slices), within=30 + 15 * slices)
        times = log.times()[:slices]
        return [t - times[0] for t in times]


def _check(cond: bool) -> None:
    assert cond


async def test_recreations_of_a_crash_looping_slice_are_spaced_by_a_doubling_wait(
    world: World, tmp_path: Path
) -> None:
    await world.start_operator(slice_backoff_base=1.0, slice_backoff_max=4.0)
    kubectl = Kubectl(world.cluster, tmp_path)
    times = await crash_loop_until(world, "loop", 6)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    print(f"the first 6 slices' gaps {[round(g, 2) for g in gaps]}")
    # First slice, its at-once replacement, then waits of 1, 2, 4, 4 s (plus detection time):
    # each gap is at least its wait, however fast or slow the machine.
    for gap, wait in zip(gaps[1:], [1.0, 2.0, 4.0, 4.0], strict=True):
        assert gap >= wait - 0.05, (gaps, wait)

    # As a user sees it: the annotation, the status entry and a Warning Event.
    records = (await record(kubectl, "loop"))["g"]["0"]
    assert records["failures"] >= 4 and records["template"]

    async def shown_waiting() -> list[dict[str, Any]]:
        entries = await waiting(kubectl, "loop")
        assert entries and entries[0]["index"] == 0 and entries[0]["nextTryTime"]
        return entries

    await eventually(shown_waiting, within=10)
    warned = await events(kubectl, "SliceBackoff")
    assert warned and warned[0]["type"] == "Warning"
    assert "group g: slice at index 0 broke" in warned[0]["message"]
    assert "times in a row; next try at" in warned[0]["message"]


async def test_without_backoff_the_same_crash_loop_recreates_without_bound(
    world: World, tmp_path: Path
) -> None:
    await world.start_operator(slice_backoff_base=0.0)
    times = await crash_loop_for_no_wait(world, tmp_path)
    print(f"10 slices without backoff in {times[-1]:.1f} s")


async def crash_loop_for_no_wait(world: World, tmp_path: Path) -> list[float]:
    """Ten slices in a row (the doubling wait would have spaced them by 1+2+4+4... s
    with the other test's settings), and not one wait shown in the status or told in an
    Event (the annotation still counts the failures, each due at once)."""
    kubectl = Kubectl(world.cluster, tmp_path)
    times = await crash_loop_until(world, "churn", 10)
    assert not await waiting(kubectl, "churn")
    assert not await events(kubectl, "SliceBackoff")
    return times


async def test_a_fixed_template_ends_the_backoff_at_once(world: World, tmp_path: Path) -> None:
    await world.start_operator(slice_backoff_base=30.0, slice_backoff_max=30.0)
    kubectl = Kubectl(world.cluster, tmp_path)
    await kubectl.apply(raycluster("fix", [crashing_group()]))
    entries = await eventually(lambda: _waiting_entry(kubectl, "fix"), within=20)
    next_try = parse_time((await record(kubectl, "fix"))["g"]["0"]["nextTry"])
    assert (next_try - datetime.now(UTC)).total_seconds() > 20  # a 30 s wait has begun
    assert entries[0]["failures"] == 2
    # The fix, as a user makes it: drop the bad command from the worker template.
    await kubectl.patch_json(
        "raycluster",
        "fix",
        [{"op": "remove", "path": "/spec/workerGroupSpecs/0/template/spec/containers/0/command"}],
    )

    async def one_ready_slice() -> list[dict[str, Any]]:
        pods = await world.workers("fix")
        assert len(pods) == 2 and all(ready(p) for p in pods)
        return pods

    pods = await eventually(one_ready_slice, within=20)
    assert datetime.now(UTC) < next_try  # recovered long before the wait would have ended
    assert await events(kubectl, "TemplateFixed")
    assert {p["metadata"]["labels"][REPLICA_INDEX] for p in pods} == {"0"}
    await eventually(lambda: _no_waiting(kubectl, "fix"))


async def test_replicas_and_workers_to_delete_are_honoured_during_backoff(
    world: World, tmp_path: Path
) -> None:
    await world.start_operator(slice_backoff_base=30.0, slice_backoff_max=30.0)
    kubectl = Kubectl(world.cluster, tmp_path)
    group = crashing_group(replicas=2, bad=False, minReplicas=0, maxReplicas=4)
    await kubectl.apply(raycluster("as", [group], autoscaling=True))

    async def ready_at(indices: set[str]) -> list[dict[str, Any]]:
        pods = await world.workers("as")
        assert {p["metadata"]["labels"][REPLICA_INDEX] for p in pods} == indices
        assert all(ready(p) for p in pods)
        return pods

    await eventually(lambda: ready_at({"0", "1"}), within=20)
    # The template goes bad (upgradeStrategy None: running pods stay), then a host of slice 1
    # fails: its replacement, from the bad template, crash-loops into a 30 s backoff.
    await kubectl.patch_json(
        "raycluster",
        "as",
        [
            {
                "op": "add",
                "path": "/spec/workerGroupSpecs/0/template/spec/containers/0/command",
                "value": BAD["command"],
            }
        ],
    )
    victim = next(
        p for p in await world.workers("as") if p["metadata"]["labels"][REPLICA_INDEX] == "1"
    )
    await world.cluster.fail_pod("default", victim["metadata"]["name"])
    entries = await eventually(lambda: _waiting_entry(kubectl, "as"), within=20)
    assert entries[0]["index"] == 1

    # The autoscaler asks for a third slice: it is created at once, around the held index 1.
    await kubectl.patch_json("raycluster", "as", [_replace("replicas", 3)])

    async def slice_at_two() -> None:
        pods = await world.pods("as", live=False)
        assert any(p["metadata"]["labels"].get(REPLICA_INDEX) == "2" for p in pods)
        assert await _indices_waiting(kubectl, "as") >= {1}

    await eventually(slice_at_two, within=10)

    # The autoscaler removes slice 0 by name and asks for none: slice 0 goes at once, and
    # every backoff ends (nothing is wanted at the held indices any more).
    zero = next(
        p["metadata"]["name"]
        for p in await world.workers("as")
        if p["metadata"]["labels"][REPLICA_INDEX] == "0"
    )
    await kubectl.patch_json(
        "raycluster",
        "as",
        [_replace("replicas", 0), _replace("scaleStrategy", {"workersToDelete": [zero]})],
    )

    async def all_gone() -> None:
        assert await world.workers("as") == []
        assert await _indices_waiting(kubectl, "as") == set()
        assert "g" not in await record(kubectl, "as")

    await eventually(all_gone, within=15)


async def test_an_operator_restart_during_a_backoff_keeps_waiting(
    world: World, tmp_path: Path
) -> None:
    options = {"slice_backoff_base": 6.0, "slice_backoff_max": 6.0}
    first = await world.start_operator(**options)
    kubectl = Kubectl(world.cluster, tmp_path)
    await kubectl.apply(raycluster("rs", [crashing_group()]))
    async with logging_slices(world, "rs") as log:
        await eventually(lambda: _waiting_entry(kubectl, "rs"), within=20)
        next_try = parse_time((await record(kubectl, "rs"))["g"]["0"]["nextTry"])
        await first.stop()
        seen = len(log.first_seen)
        await world.start_operator(**options)  # a new process: nothing in memory
        loop = asyncio.get_running_loop()
        # Until the stored next try, the new operator creates nothing at the held index.
        while (left := (next_try - datetime.now(UTC)).total_seconds()) > 0.3:
            assert len(log.first_seen) == seen, "recreated during the backoff after a restart"
            await asyncio.sleep(min(0.1, left))
        began = loop.time()
        await eventually(lambda: _check(len(log.first_seen) > seen), within=10)
        print(f"restart: retried {loop.time() - began:.2f} s after the stored next try")
    assert await events(kubectl, "BackoffRetry")


def _replace(field: str, value: Any) -> dict[str, Any]:
    """A JSON patch operation on the first worker group (what the autoscaler writes)."""
    return {"op": "add", "path": f"/spec/workerGroupSpecs/0/{field}", "value": value}


async def test_under_kuberays_crd_the_annotation_alone_keeps_the_backoff(tmp_path: Path) -> None:
    """KubeRay's CRD prunes our status extensions (docs/design.md §3.7): the status shows no
    backoff, yet the wait holds, because the records live in the RayCluster's annotation."""
    async with running_world(crd=kuberay_crd()) as world:
        options = {"slice_backoff_base": 5.0, "slice_backoff_max": 5.0}
        await world.start_operator(**options)
        kubectl = Kubectl(world.cluster, tmp_path)
        await kubectl.apply(raycluster("kr", [crashing_group()]))
        async with logging_slices(world, "kr") as log:

            async def second_break_counted() -> dict[str, Any]:
                entry: dict[str, Any] = (await record(kubectl, "kr")).get("g", {}).get("0", {})
                assert entry.get("failures") == 2
                return entry

            entry = await eventually(second_break_counted, within=20)
            assert await waiting(kubectl, "kr") == []  # pruned by KubeRay's schema
            next_try = parse_time(entry["nextTry"])
            seen = len(log.first_seen)
            while (left := (next_try - datetime.now(UTC)).total_seconds()) > 0.3:
                assert len(log.first_seen) == seen, "recreated during the backoff"
                await asyncio.sleep(min(0.1, left))
            await eventually(lambda: _check(len(log.first_seen) > seen), within=10)


async def _waiting_entry(kubectl: Kubectl, cluster: str) -> list[dict[str, Any]]:
    entries = await waiting(kubectl, cluster)
    assert entries
    return entries


async def _indices_waiting(kubectl: Kubectl, cluster: str) -> set[int]:
    return {e["index"] for e in await waiting(kubectl, cluster)}


async def _no_waiting(kubectl: Kubectl, cluster: str) -> None:
    assert await waiting(kubectl, cluster) == []
