"""What the operator leaves alone: other namespaces, other controllers' clusters."""

from __future__ import annotations

from raycluster_operator.controller.crds import crd_manifest
from tests.harness.operator_world import World, cpu_group, eventually, labels_of, raycluster


async def test_namespace_scope_and_managed_by_are_respected(world: World) -> None:
    await world.start_operator(namespaces=("default",))
    outside = raycluster("outside", [cpu_group("w", replicas=1)])
    outside["metadata"]["namespace"] = "elsewhere"
    await world.cluster.apply(outside, namespace="elsewhere")
    foreign = raycluster("foreign", [cpu_group("w", replicas=1)])
    foreign["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    await world.apply(foreign)
    await world.apply(raycluster("mine", [cpu_group("w", replicas=1)]))

    async def mine_runs() -> None:
        assert len(await world.workers("mine")) == 1

    await eventually(mine_runs)
    await world.reconciled("foreign")
    assert await world.pods("foreign") == []
    assert "status" not in await world.get_cluster("foreign")
    assert await world.pods("outside", "elsewhere") == []


async def test_with_the_gate_off_single_host_pods_carry_no_replica_index(world: World) -> None:
    await world.start_operator(multi_host_indexing=False)
    await world.apply(raycluster("nogate", [cpu_group("g", replicas=2)]))

    async def plain_pods() -> None:
        pods = await world.workers("nogate")
        assert len(pods) == 2
        assert not any("ray.io/worker-group-replica-index" in labels_of(p) for p in pods)

    await eventually(plain_pods)


async def test_an_unreadable_cluster_gets_one_warning_and_no_further_writes(world: World) -> None:
    from raycluster_operator.kube import EVENTS

    # Our CRD refuses a mistyped count; an older or hand-written CRD that preserves the spec
    # (the operator runs under whichever CRD is installed) lets it through.
    permissive = crd_manifest()
    schema = permissive["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    await world.cluster.apply(permissive)
    op = await world.start_operator(resync_period=0.05)
    broken = raycluster("broken", [cpu_group("w", replicas=1)])
    broken["spec"]["workerGroupSpecs"][0]["numOfHosts"] = "four"
    await world.apply(broken)

    async def warned() -> None:
        events = (await world.kube.list(EVENTS, "default")).items
        assert [e["reason"] for e in events if e["type"] == "Warning"] == ["InvalidSpec"]

    await eventually(warned)
    await world.reconciled("broken")  # the pass that warned has written its status too
    writes = op.writes
    await world.reconciled("broken", passes=3)
    assert op.writes == writes
    assert await world.pods("broken") == []


async def test_several_watched_namespaces_are_served_by_one_operator(world: World) -> None:
    await world.start_operator(namespaces=("default", "team"))
    await world.apply(raycluster("same", [cpu_group("w", replicas=1)]))
    other = raycluster("same", [cpu_group("w", replicas=2)])
    other["metadata"]["namespace"] = "team"
    await world.cluster.apply(other, namespace="team")

    async def both() -> None:
        assert len(await world.workers("same")) == 1
        team = await world.pods("same", "team")
        assert len([p for p in team if labels_of(p)["ray.io/node-type"] == "worker"]) == 2

    await eventually(both)
