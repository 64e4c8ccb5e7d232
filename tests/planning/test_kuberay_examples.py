"""KubeRay's own multi-host test scenarios (docs/design.md §9.1), replayed against our planner."""

from __future__ import annotations

from collections import defaultdict

from raycluster_operator.api import labels

from .cluster import Loop, cluster, cluster_obj, worker_group
from .world import World


def slices(world: World, group: str = "workers") -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    for pod in world.list():
        lab = pod["metadata"]["labels"]
        if lab.get(labels.GROUP) == group and not pod["metadata"].get("deletionTimestamp"):
            out[lab[labels.REPLICA_NAME]].append(lab)
    return out


def worker_count(world: World) -> int:
    return sum(
        1
        for p in world.list()
        if p["metadata"]["labels"].get(labels.NODE_TYPE) == "worker"
        and not p["metadata"].get("deletionTimestamp")
    )


def tpu_group(**fields: object) -> dict[str, object]:
    return worker_group(numOfHosts=4, minReplicas=0, maxReplicas=4, **fields)


def test_three_slices_of_four_hosts() -> None:
    loop = Loop(cluster(tpu_group(replicas=3)))
    plan = loop.settle()
    found = slices(loop.world)
    assert worker_count(loop.world) == 12
    assert len(found) == 3
    assert {next(iter({p[labels.REPLICA_INDEX] for p in pods})) for pods in found.values()} == {
        "0",
        "1",
        "2",
    }
    for pods in found.values():
        assert sorted(int(p[labels.HOST_INDEX]) for p in pods) == [0, 1, 2, 3]
        assert len({p[labels.REPLICA_INDEX] for p in pods}) == 1
    status = plan.status
    assert (
        status["desiredWorkerReplicas"],
        status["minWorkerReplicas"],
        status["maxWorkerReplicas"],
    ) == (12, 0, 16)
    assert status["desiredWorkerSlices"] == 3 and status["readyWorkerSlices"] == 3


def test_workers_to_delete_then_scale_up_then_heal() -> None:
    loop = Loop(cluster(tpu_group(replicas=3)))
    loop.settle()
    victim = sorted(slices(loop.world).items())[1]
    names = [
        n
        for n, p in loop.world.pods.items()
        if p["metadata"]["labels"].get(labels.REPLICA_NAME) == victim[0]
    ]
    assert len(names) == 4
    obj = cluster_obj(tpu_group(replicas=2, scaleStrategy={"workersToDelete": names}))
    loop.respec(obj)
    first = loop.plan()
    assert sorted(d.name for d in first.deletes) == sorted(names)
    loop.apply(first)
    loop.settle()
    assert worker_count(loop.world) == 8
    assert victim[0] not in slices(loop.world)

    loop.respec(cluster_obj(tpu_group(replicas=4, scaleStrategy={"workersToDelete": names})))
    loop.settle()
    assert worker_count(loop.world) == 16

    some_pod = next(
        n
        for n, p in loop.world.pods.items()
        if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
    )
    del loop.world.pods[some_pod]
    loop.settle()
    assert worker_count(loop.world) == 16
    assert len(slices(loop.world)) == 4


def test_single_host_index_is_refilled() -> None:
    loop = Loop(cluster(worker_group(replicas=3)))
    loop.settle()

    def indices() -> dict[str, str]:
        return {
            n: p["metadata"]["labels"][labels.REPLICA_INDEX]
            for n, p in loop.world.pods.items()
            if p["metadata"]["labels"][labels.NODE_TYPE] == "worker"
        }

    assert sorted(indices().values()) == ["0", "1", "2"]
    one = next(n for n, i in indices().items() if i == "1")
    del loop.world.pods[one]
    plan = loop.plan()
    assert [(c.replica_index, c.host_index, c.replica_name) for c in plan.creates] == [
        (1, None, None)
    ]
    loop.apply(plan)
    assert sorted(indices().values()) == ["0", "1", "2"]


def test_min_and_max_count_slices_times_hosts() -> None:
    status = Loop(cluster(worker_group(numOfHosts=4, minReplicas=2, maxReplicas=3))).plan().status
    assert (status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (8, 12)
    assert status["desiredWorkerReplicas"] == 8  # replicas unset means minReplicas


def test_replicas_above_max_are_clamped() -> None:
    unbounded = Loop(cluster(worker_group(numOfHosts=4, replicas=5)))
    assert unbounded.plan().status["desiredWorkerReplicas"] == 20
    capped = Loop(cluster(worker_group(numOfHosts=4, replicas=5, maxReplicas=3)))
    plan = capped.plan()
    assert plan.status["desiredWorkerReplicas"] == 12
    assert len([c for c in plan.creates if c.group == "workers"]) == 12
