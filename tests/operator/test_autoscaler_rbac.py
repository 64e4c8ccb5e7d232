"""The autoscaler's ServiceAccount, Role and RoleBinding: kept in place without restarts."""

from __future__ import annotations

import pytest

from raycluster_operator.kube import ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, Kind, NotFound
from tests.harness.operator_world import World, cpu_group, eventually, raycluster

KINDS = [SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS]


async def _exists(world: World, kind: Kind, name: str) -> str:
    """The object's uid; AssertionError (which ``eventually`` retries) while it is missing."""
    try:
        obj = await world.kube.get(kind, "default", name)
    except NotFound as exc:
        raise AssertionError(f"{kind.kind} {name} missing") from exc
    return str(obj["metadata"]["uid"])


@pytest.mark.parametrize("kind", KINDS, ids=[k.kind for k in KINDS])
async def test_a_deleted_autoscaler_object_is_recreated_by_the_running_operator(
    world: World, kind: Kind
) -> None:
    op = await world.start_operator(resync_period=3600.0)  # no resync: the watch must heal it
    await world.apply(raycluster("auto", [cpu_group("cpu", replicas=1)], autoscaling=True))

    async def all_there() -> None:
        for k in KINDS:
            await _exists(world, k, "auto")

    await eventually(all_there)
    before = await _exists(world, kind, "auto")
    await world.kube.delete(kind, "default", "auto")

    async def recreated() -> None:
        assert await _exists(world, kind, "auto") != before

    await eventually(recreated, within=10)

    # Healed and converged: the extra watches cost no writes from here on.
    await world.reconciled("auto")
    writes = op.writes
    await world.reconciled("auto", passes=3)
    assert op.writes == writes


async def test_a_converged_autoscaling_cluster_causes_no_writes(world: World) -> None:
    op = await world.start_operator(resync_period=0.05)
    await world.apply(raycluster("calm", [cpu_group("cpu", replicas=1)], autoscaling=True))
    await eventually(lambda: _exists(world, ROLE_BINDINGS, "calm"))
    await eventually(lambda: _ready(world, "calm"))
    await world.reconciled("calm")
    writes, reconciles = op.writes, op.manager.reconciles
    await world.reconciled("calm", passes=10)  # and the resyncs' passes between
    assert op.manager.reconciles - reconciles >= 10
    assert op.writes == writes


async def _ready(world: World, name: str) -> None:
    status = (await world.get_cluster(name)).get("status") or {}
    assert status.get("state") == "ready"
