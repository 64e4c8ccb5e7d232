"""Ray's v2 `KubeRayProvider` scaling a multi-host TPU group (v6e 4x4, 4 hosts per slice)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from raycluster_operator.api.validation import parse_cluster
from raycluster_operator.planning import ClusterState, PlanContext, PlanOptions, plan_cluster

pytestmark = pytest.mark.control_planes
HOSTS = 4


def _group(world: Any, ns: str, name: str, index: int = 0) -> dict[str, Any]:
    return world.get_cluster(ns, name)["spec"]["workerGroupSpecs"][index]  # type: ignore[no-any-return]


def _errors(provider: Any) -> list[str]:
    return [f"{type(e).__name__}: {e}" for e in provider.poll_errors()]


def _first_pass_deletes(world: Any, ns: str, name: str, pods: list[dict[str, Any]]) -> set[str]:
    """The pods the operator's next pass deletes, given the spec as Ray left it and `pods`
    (the world the operator's cache held when Ray's patch arrived)."""
    obj = world.get_cluster(ns, name)
    cluster, problems = parse_cluster(obj)
    assert cluster is not None, problems
    options = PlanOptions(unready_slice_timeout=0)  # no nodes here: host loss is not asked
    context = PlanContext(ClusterState(obj, pods), datetime.now(UTC), lambda: "zzzzz", options)
    plan = plan_cluster(cluster, context)
    return {d.name for d in plan.deletes}


def _slice_gone(world: Any, ns: str, name: str, pod_names: set[str]) -> bool:
    """Every pod of the slice is terminating or already removed."""
    return not world.live_names(ns, name) & pod_names


def test_launch_terminate_and_relaunch_tpu_slices(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("tpu", kit.tpu_group("tpu", max_replicas=2)))
    provider = world.v2_provider(ns, "tpu")
    world.wait("the head pod", lambda: world.live_names(ns, "tpu", "headgroup"))

    # Launch enough nodes for two slices.
    provider.launch({"tpu": 2 * HOSTS}, "launch-1")
    assert _errors(provider) == []
    assert _group(world, ns, "tpu")["replicas"] == 2
    two = world.wait_slices(ns, "tpu", "tpu", HOSTS, 2, running=True)
    assert sorted(two) == [0, 1]
    for index, members in two.items():
        for host, pod in enumerate(members):
            lab = kit.labels(pod)
            assert lab["replicaIndex"] == f"tpu-{index}"
            assert lab[kit.HOST_INDEX] == str(host)
    nodes = provider.get_non_terminated()
    workers = {i for i, n in nodes.items() if n.node_type == "tpu"}
    assert workers == {p["metadata"]["name"] for m in two.values() for p in m}
    assert all(nodes[i].is_running for i in workers)

    # Terminate one host of slice 0: v2 names only that pod and asks for one slice.
    victim = two[0][2]["metadata"]["name"]
    slice0 = {p["metadata"]["name"] for p in two[0]}
    before = world.pods(ns, "tpu")
    provider.terminate([victim], "terminate-1")
    assert _errors(provider) == []
    group = _group(world, ns, "tpu")
    assert group["replicas"] == 1
    assert group["scaleStrategy"]["workersToDelete"] == [victim]
    # One pass deletes the whole slice, not just the pod Ray named.
    assert _first_pass_deletes(world, ns, "tpu", before) == slice0
    world.wait("slice 0 terminating", lambda: _slice_gone(world, ns, "tpu", slice0), timeout=5)
    survivors = kit.complete_slices(world.pods(ns, "tpu"), "tpu", HOSTS)
    assert list(survivors) == [1]
    assert {i for i, n in provider.get_non_terminated().items() if n.node_type == "tpu"} == {
        p["metadata"]["name"] for p in two[1]
    }

    # The next launch is accepted at once (nothing named is still live) and clears the list.
    provider.launch({"tpu": HOSTS}, "launch-2")
    assert _errors(provider) == []
    group = _group(world, ns, "tpu")
    assert group["replicas"] == 2
    assert group["scaleStrategy"]["workersToDelete"] == []
    again = world.wait_slices(ns, "tpu", "tpu", HOSTS, 2, running=True)
    assert 1 in again
    new_index = (set(again) - {1}).pop()
    new_names = {kit.labels(p)[kit.REPLICA_NAME] for p in again[new_index]}
    assert new_names.isdisjoint({kit.labels(p)[kit.REPLICA_NAME] for p in two[0]})
    # Survivors were never touched.
    assert {p["metadata"]["name"] for p in again[1]} == {p["metadata"]["name"] for p in two[1]}


def test_terminating_hosts_of_two_slices_at_once(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("two", kit.tpu_group(replicas=2, max_replicas=2)))
    provider = world.v2_provider(ns, "two")
    before = world.wait_slices(ns, "two", "tpu", HOSTS, 2)
    provider.get_non_terminated()

    victims = [before[0][1]["metadata"]["name"], before[1][3]["metadata"]["name"]]
    pods_before = world.pods(ns, "two")
    provider.terminate(victims, "terminate-two")
    assert _errors(provider) == []
    group = _group(world, ns, "two")
    # (8 - 2) // 4: Ray asks for one slice while naming hosts of two.
    assert group["replicas"] == 1
    assert sorted(group["scaleStrategy"]["workersToDelete"]) == sorted(victims)

    old = {p["metadata"]["name"] for m in before.values() for p in m}
    assert _first_pass_deletes(world, ns, "two", pods_before) == old
    world.wait("both slices terminating", lambda: _slice_gone(world, ns, "two", old), timeout=5)
    # As many complete slices as replicas says.
    after = world.wait_slices(ns, "two", "tpu", HOSTS, 1)
    assert _group(world, ns, "two")["replicas"] == 1
    assert not {p["metadata"]["name"] for m in after.values() for p in m} & old
    # The provider agrees and accepts the next request.
    tpu_nodes = [n for n in provider.get_non_terminated().values() if n.node_type == "tpu"]
    assert len(tpu_nodes) == HOSTS
    provider.terminate([], "noop")
    assert _errors(provider) == []


def test_min_and_max_replicas(world: Any, ns: str, kit: Any) -> None:
    group = kit.tpu_group("tpu", replicas=0, min_replicas=1, max_replicas=2)
    world.create_cluster(ns, kit.raycluster("bounds", group))
    provider = world.v2_provider(ns, "bounds")
    # minReplicas wins over replicas 0.
    first = world.wait_slices(ns, "bounds", "tpu", HOSTS, 1)
    assert list(first) == [0]
    status = world.wait(
        "status counting pods",
        lambda: (
            (st := world.get_cluster(ns, "bounds").get("status") or {}).get("maxWorkerReplicas")
            and st
        ),
    )
    assert status["minWorkerReplicas"] == HOSTS
    assert status["maxWorkerReplicas"] == 2 * HOSTS

    # Three slices asked for, two allowed: Ray caps and reports the rest.
    provider.launch({"tpu": 3 * HOSTS}, "too-many")
    errors = provider.poll_errors()
    assert [(e.node_type, e.count) for e in errors] == [("tpu", 2 * HOSTS)]
    assert "maxReplicas" in str(errors[0])
    assert _group(world, ns, "bounds")["replicas"] == 2
    both = world.wait_slices(ns, "bounds", "tpu", HOSTS, 2)
    assert sorted(both) == [0, 1]
    assert len(kit.workers(world.pods(ns, "bounds"), "tpu")) == 2 * HOSTS
