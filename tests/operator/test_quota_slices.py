"""A slice is created whole or not at all (docs/design.md §4 rule 13c), on the dev cluster
with its ResourceQuota admission: a v6e group of 4-host slices (4 chips a host) at replicas 2
in a namespace whose quota holds 16 chips runs one slice; the second waits, shown in status
and a `SliceQuotaExceeded` Warning Event, and none of its pods is ever created (every pod
the API ever held is recorded by a watch from the start); raising the quota to 32 creates
it. A race (the quota shrinks while the slice's creates are in flight) leaves no partial
slice behind and no create/delete churn. On the user's path with kubectl, an operator
restarted while the slice waits for quota keeps it waiting whole, with its record, and
creates it once when the quota is raised."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devkube.machinery.client import resource_path
from raycluster_operator.kube import RAYCLUSTERS
from tests.harness import manifests as m
from tests.harness.kubectl import ok, runner
from tests.harness.operator_world import SMALL, World, eventually, raycluster, ready, tpu_group

pytestmark = pytest.mark.control_planes

NS = "team"
INDEX = "ray.io/worker-group-replica-index"
CHIPS = "requests.google.com/tpu"


class PodLog:
    """Every pod of the namespace the API ever showed: added names by replica index, and
    the names ever deleted (a watch from before the operator starts)."""

    def __init__(self) -> None:
        self.added: dict[str, str] = {}
        self.deleted: set[str] = set()
        self.first_seen: dict[str, float] = {}

    def of_index(self, index: int) -> list[str]:
        return [n for n, i in self.added.items() if i == str(index)]

    async def follow(self, world: World) -> None:
        async for event in world.cluster.client.list_and_watch(f"/api/v1/namespaces/{NS}/pods"):
            objs = event.object.get("items") or [] if event.type == "SYNC" else [event.object]
            for pod in objs:
                meta = pod["metadata"]
                self.added.setdefault(meta["name"], (meta.get("labels") or {}).get(INDEX, ""))
                self.first_seen.setdefault(meta["name"], asyncio.get_running_loop().time())
                if event.type == "DELETED" or meta.get("deletionTimestamp"):
                    self.deleted.add(meta["name"])


@contextlib.asynccontextmanager
async def pod_log(world: World) -> AsyncIterator[PodLog]:
    log = PodLog()
    task = asyncio.create_task(log.follow(world))
    try:
        yield log
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def set_quota(world: World, chips: int) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "tpu", "namespace": NS},
        "spec": {"hard": {CHIPS: str(chips)}},
    }
    await world.cluster.apply(quota)

    async def synced() -> None:
        got = await world.cluster.client.get(resource_path("v1", "resourcequotas", NS, "tpu"))
        assert (got.get("status") or {}).get("hard", {}).get(CHIPS) == str(chips)

    await eventually(synced)


async def status(world: World, name: str) -> dict[str, Any]:
    obj = await world.kube.get(RAYCLUSTERS, NS, name)
    result: dict[str, Any] = obj.get("status") or {}
    return result


def condition(st: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c["type"] == "SliceQuotaExceeded"), None)


async def ready_slices(world: World, name: str, n: int) -> None:
    pods = [p for p in await world.pods(name, NS) if p["metadata"]["labels"].get(INDEX)]
    assert len(pods) == 4 * n and all(ready(p) for p in pods), len(pods)


async def quota_events(world: World) -> list[dict[str, Any]]:
    listing = await world.cluster.client.list(
        f"/api/v1/namespaces/{NS}/events", fieldSelector="reason=SliceQuotaExceeded"
    )
    items: list[dict[str, Any]] = listing.get("items") or []
    return items


async def test_second_slice_waits_for_quota_and_is_created_when_it_is_raised(
    world: World,
) -> None:
    await world.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await set_quota(world, 16)
    await world.start_operator()
    async with pod_log(world) as log:
        cluster = raycluster("q", [tpu_group("tpu", replicas=2)])
        cluster["metadata"]["namespace"] = NS
        await world.apply(cluster)
        await eventually(lambda: ready_slices(world, "q", 1), within=60)

        async def waiting() -> dict[str, Any]:
            st = await status(world, "q")
            cond = condition(st)
            assert cond and cond["status"] == "True", st.get("conditions")
            assert st["workerGroups"][0]["quotaWaiting"] == [1]
            return cond

        cond = await eventually(waiting, within=30)
        assert cond["reason"] == "SliceQuotaExceeded"
        assert (
            "group tpu: slice at index 1 (4 hosts) waits, not created: exceeded quota: tpu"
            in (cond["message"])
        )
        events = await eventually(lambda: _nonempty(quota_events(world)), within=30)
        note = events[0]["message"]
        assert events[0]["type"] == "Warning"
        assert f"requested: {CHIPS}=16, used: {CHIPS}=16, limited: {CHIPS}=16" in note, note
        assert f"missing {CHIPS}=16" in note, note
        # The barrier for the negative: the operator has planned since the slice waited.
        assert log.of_index(1) == [], log.added
        assert len(log.of_index(0)) == 4

        loop = asyncio.get_running_loop()
        raised = loop.time()
        await set_quota(world, 32)
        await eventually(lambda: ready_slices(world, "q", 2), within=60)
        print(f"quota raised to slice 2 ready: {loop.time() - raised:.2f} s")
        st = await eventually(lambda: _cleared(world), within=30)
        assert "quotaWaiting" not in st["workerGroups"][0]
        assert not log.deleted, log.deleted  # no create/delete churn at any point
        assert len(log.of_index(1)) == 4


async def _nonempty(items: Any) -> Any:
    got = await items
    assert got
    return got


async def _cleared(world: World, name: str = "q") -> dict[str, Any]:
    st = await status(world, name)
    cond = condition(st)
    assert cond is not None and cond["status"] == "False", st.get("conditions")
    return st


@pytest.mark.embedded_only("holds pod creates at the server with the embedded fault injection")
async def test_quota_shrinking_mid_slice_leaves_no_partial_slice_and_no_churn(
    world: World,
) -> None:
    await world.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await set_quota(world, 32)
    await world.start_operator()
    async with pod_log(world) as log:
        cluster = raycluster("r", [tpu_group("tpu", replicas=1)])
        cluster["metadata"]["namespace"] = NS
        await world.apply(cluster)
        await eventually(lambda: ready_slices(world, "r", 1), within=60)

        # Hold the next pod creates at the server, so the quota can shrink while they are in
        # flight: the operator's check (32 - 16 free) is already made when they arrive.
        faults = world.cluster.faults
        original = faults.decide
        arrived = asyncio.Event()
        armed = [True]

        def decide(verb: str, resource: str) -> Any:
            delay, error = original(verb, resource)
            if verb == "create" and resource == "pods" and armed[0]:
                arrived.set()
                delay += 2.0
            return delay, error

        faults.decide = decide  # type: ignore[method-assign]
        await world.kube.patch(
            RAYCLUSTERS, NS, "r", {"spec": {"workerGroupSpecs": [tpu_group("tpu", replicas=2)]}}
        )
        await eventually(lambda: _check(arrived.is_set()), within=30)
        await set_quota(world, 20)  # room for one more host only
        armed[0] = False

        async def held() -> dict[str, Any]:
            st = await status(world, "r")
            cond = condition(st)
            assert cond and cond["status"] == "True", st.get("conditions")
            return st

        await eventually(held, within=30)
        made = log.of_index(1)
        # One host got in before the quota ran out; it went in the same pass.
        assert len(made) == 1, log.added
        assert set(made) <= log.deleted
        live = [p for p in await world.pods("r", NS) if p["metadata"]["labels"].get(INDEX) == "1"]
        assert live == []
        # No churn: more passes (the hold's end, the quota controller's recount) create
        # nothing while the slice does not fit.
        await asyncio.sleep(0)  # yield to the watch task
        before = await status(world, "r")
        await eventually(lambda: _passed_hold(world, before), within=30)
        assert log.of_index(1) == made, log.added


def _check(cond: bool) -> None:
    assert cond


async def _passed_hold(world: World, before: dict[str, Any]) -> None:
    """The waiting slice is now held for quota by the planner's own check (the hold after
    the refusal has ended and the cache shows the shrunken quota)."""
    cond = condition(await status(world, "r"))
    assert cond and "missing requests.google.com/tpu=" in cond["message"], cond


async def test_without_the_quota_grant_a_refused_slice_is_undone_and_backs_off(
    world: World,
) -> None:
    """The install without `list`/`watch` on resourcequotas: no check before creating, so the
    API refuses the second slice mid-way; each attempt's admitted host is deleted in its own
    pass, and attempts are spaced by the doubling hold (5 s, then 10 s), not churned; a
    restart costs one attempt at once, then the hold from its first wait."""
    await world.operator_kubeconfig()
    path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/raycluster-operator"
    role = await world.cluster.client.get(path)
    role["rules"] = [r for r in role["rules"] if "resourcequotas" not in r["resources"]]
    await world.cluster.client.replace(path, role)
    await world.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    await set_quota(world, 20)  # one slice and one host
    op = await world.start_operator()
    assert op.manager.sources.quotas.enabled is False
    async with pod_log(world) as log:
        cluster = raycluster("n", [tpu_group("tpu", replicas=2)])
        cluster["metadata"]["namespace"] = NS
        await world.apply(cluster)

        def three_attempts() -> None:
            assert len(log.of_index(1)) >= 3, log.added

        await eventually(three_attempts, within=90)
        attempts = sorted(log.first_seen[n] for n in log.of_index(1))
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        print(f"attempts of the refused slice spaced {[round(g, 1) for g in gaps]} s")
        assert gaps[0] >= 4.5 and gaps[1] >= 9.5, gaps
        # Every attempt got one host in and lost it in the same pass: never a partial slice.
        await eventually(lambda: _check(set(log.of_index(1)[:3]) <= log.deleted), within=30)

        async def shown_held() -> None:
            cond = condition(await status(world, "n"))
            assert cond and cond["status"] == "True" and cond["reason"] == "SliceQuotaExceeded"
            assert "exceeded quota: tpu" in cond["message"]

        await eventually(shown_held, within=30)
        assert len(log.of_index(0)) == 4

        # Holds live in memory (rule 13c): a restarted operator tries once more at once, then
        # holds again from the first wait; every attempt still loses its host in its pass.
        await op.crash()
        seen = len(log.of_index(1))
        await world.start_operator()

        def two_more() -> None:
            assert len(log.of_index(1)) >= seen + 2, log.added

        await eventually(two_more, within=60)
        after = sorted(log.first_seen[n] for n in log.of_index(1))[seen:]
        print(f"after the restart, attempts spaced {round(after[1] - after[0], 1)} s")
        assert after[1] - after[0] >= 4.5
        await eventually(lambda: _check(set(log.of_index(1)[: seen + 2]) <= log.deleted))
        assert len(log.of_index(0)) == 4


async def test_a_restart_while_a_slice_waits_for_quota_keeps_it_whole_and_recorded(
    world: World, tmp_path: Path
) -> None:
    """As a team admin does it: kubectl creates the namespace, its quota (16 chips) and the
    RayCluster (two 4-host slices). The second slice waits; the operator crashes and a new
    one starts: it reads the same quota, creates no pod of the waiting slice, keeps the
    condition and its Event as they were (no second record), and once `kubectl patch` raises
    the quota to 32 the slice is created once, whole, with nothing ever deleted."""
    kubectl = runner(world.cluster.write_kubeconfig(tmp_path / "admin"))
    await ok(kubectl, "create", "namespace", NS)
    await ok(kubectl, "create", "quota", "tpu", "-n", NS, f"--hard={CHIPS}=16")
    first = await world.start_operator()
    async with pod_log(world) as log:
        cluster = raycluster("h", [tpu_group("tpu", replicas=2)])
        cluster["metadata"]["namespace"] = NS
        await ok(kubectl, "apply", "-f", "-", input=json.dumps(cluster))
        await eventually(lambda: ready_slices(world, "h", 1), within=60)

        async def waiting() -> tuple[dict[str, Any], list[dict[str, Any]]]:
            st = await status(world, "h")
            cond = condition(st)
            assert cond and cond["status"] == "True", st.get("conditions")
            assert st["workerGroups"][0]["quotaWaiting"] == [1]
            events = await quota_events(world)
            assert events
            return cond, events

        cond, events = await eventually(waiting, within=30)
        await first.crash()
        await world.start_operator()
        await world.reconciled("h", NS, passes=2)
        assert await waiting() == (cond, events)  # the same record, not a second one
        assert log.of_index(1) == [], log.added

        patch = json.dumps({"spec": {"hard": {CHIPS: "32"}}})
        await ok(kubectl, "patch", "quota", "tpu", "-n", NS, "-p", patch)
        await eventually(lambda: ready_slices(world, "h", 2), within=60)
        await eventually(lambda: _cleared(world, "h"), within=30)
        assert len(log.of_index(1)) == 4 and not log.deleted, (log.added, log.deleted)


async def test_accelerators_set_only_in_limits_are_charged_before_creation(
    world: World,
) -> None:
    """A TPU or GPU set only in `limits` (the common way) is charged what admission charges
    it (requests default from limits, §4 rule 13c): the second slice of each group waits
    whole, and the API never refuses one of the operator's creates (a refusal would show
    as kube's `forbidden` sentence in the condition and the Events, and pods of index 1)."""
    gpus = "requests.nvidia.com/gpu"
    await world.cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "accel", "namespace": NS},
        "spec": {"hard": {CHIPS: "16", gpus: "16"}},
    }
    await world.cluster.apply(quota)

    async def synced() -> None:
        got = await world.cluster.client.get(resource_path("v1", "resourcequotas", NS, "accel"))
        assert set((got.get("status") or {}).get("used") or {}) == {CHIPS, gpus}

    await eventually(synced)
    await world.start_operator()
    tpu = m.template(
        m.container("ray-worker", requests=SMALL, limits={"google.com/tpu": "4"}),
        nodeSelector=dict(m.V6E_4X4),
    )
    gpu = m.template(m.container("ray-worker", requests=SMALL, limits={"nvidia.com/gpu": "8"}))
    groups = [
        m.worker_group(g, pod, replicas=2, min_replicas=0, max_replicas=4, hosts=h)
        for g, pod, h in (("tpu", tpu, 4), ("gpu", gpu, 2))
    ]
    async with pod_log(world) as log:
        cluster = raycluster("lim", groups)
        cluster["metadata"]["namespace"] = NS
        await world.apply(cluster)

        async def waiting() -> dict[str, Any]:
            st = await status(world, "lim")
            assert [g.get("quotaWaiting") for g in st.get("workerGroups") or []] == [[1], [1]]
            cond = condition(st)
            assert cond and cond["status"] == "True", st.get("conditions")
            return cond

        cond = await eventually(waiting, within=60)
        assert f"missing {CHIPS}=16" in cond["message"], cond["message"]
        assert f"missing {gpus}=16" in cond["message"], cond["message"]
        assert "forbidden" not in cond["message"], cond["message"]
        used = await world.cluster.client.get(resource_path("v1", "resourcequotas", NS, "accel"))
        assert used["status"]["used"] == {CHIPS: "16", gpus: "16"}, used["status"]
        events = (await world.cluster.client.list(f"/api/v1/namespaces/{NS}/events"))["items"]
        assert not [e for e in events if "forbidden" in e.get("message", "")], events
        assert log.of_index(1) == [] and not log.deleted, (log.added, log.deleted)
        assert len(log.of_index(0)) == 4 + 2
