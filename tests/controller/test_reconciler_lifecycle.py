"""The reconciler over a fake API: clusters it must not plan (unreadable, foreign, deleted)."""

from __future__ import annotations

from fake_kube import KEY, World, cpu_group, raycluster

from raycluster_operator.kube import PODS, RAYCLUSTERS
from raycluster_operator.planning import IDLE_TERMINATION_FINALIZER


def unreadable(hosts: object = "four") -> dict:
    cluster = raycluster(cpu_group(replicas=1))
    cluster["spec"]["workerGroupSpecs"][0]["numOfHosts"] = hosts
    return cluster


def invalid_spec(w: World) -> dict:
    conditions = w.cluster().get("status", {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "InvalidSpec")


async def test_an_unreadable_spec_gets_the_condition_and_one_event_and_nothing_else() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, unreadable())
    assert await w.step() > 0
    assert w.pods() == [] and w.kube.writes_of("create", "services") == []
    condition = invalid_spec(w)
    assert condition["status"] == "True" and "numOfHosts" in condition["message"]
    (event,) = w.events()
    assert (event["type"], event["reason"], event["action"]) == (
        "Warning",
        "InvalidSpec",
        "Validate",
    )
    for _ in range(3):
        assert await w.step() == 0  # reported once; the condition stands


async def test_an_unreadable_spec_is_reported_again_when_its_problem_changes() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, unreadable("four"))
    await w.step()
    first = invalid_spec(w)["message"]
    cluster = w.cluster()
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = "many"
    w.kube.put(RAYCLUSTERS, cluster)
    await w.step()
    assert len(w.events("InvalidSpec")) == 2
    assert invalid_spec(w)["message"] != first and "replicas" in invalid_spec(w)["message"]


async def test_a_fixed_spec_is_planned_again() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, unreadable())
    await w.step()
    w.kube.put(RAYCLUSTERS, {**w.cluster(), "spec": raycluster(cpu_group(replicas=1))["spec"]})
    await w.converge()
    assert len(w.pods("cpu")) == 1
    assert invalid_spec(w)["status"] == "False"


async def test_a_cluster_managed_by_another_controller_is_left_alone() -> None:
    w = World()
    w.kube.put(
        RAYCLUSTERS, raycluster(cpu_group(replicas=2), managedBy="kueue.x-k8s.io/multikueue")
    )
    assert await w.step() == 0
    assert w.kube.calls == []


async def test_kuberays_own_manager_name_is_ours() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1), managedBy="ray.io/kuberay-operator"))
    await w.converge()
    assert len(w.pods("cpu")) == 1


async def test_a_deleted_cluster_loses_its_pods_before_rays_finalizer_is_released() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=2)))
    await w.converge()
    cluster = w.cluster()
    cluster["metadata"]["finalizers"] = ["example.com/other", IDLE_TERMINATION_FINALIZER]
    cluster["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w.kube.put(RAYCLUSTERS, cluster)

    await w.step()
    assert w.pods() == []
    assert w.kube.writes_of("patch", "rayclusters") == []  # not while pods remain
    (event,) = w.events("ClusterDeleting")
    assert event["action"] == "DeletePod" and "3 pods" in event["message"]
    assert w.metrics.pods_deleted.labels("ClusterDeleting")._value.get() == 3

    await w.step()
    assert w.cluster()["metadata"]["finalizers"] == ["example.com/other"]
    assert await w.step() == 0


async def test_a_deleted_cluster_without_rays_finalizer_is_left_to_the_garbage_collector() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await w.converge()
    cluster = w.cluster()
    cluster["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cluster["metadata"]["finalizers"] = ["foregroundDeletion"]
    w.kube.put(RAYCLUSTERS, cluster)
    assert await w.step() == 0
    assert len(w.pods()) == 2


async def test_a_cluster_gone_from_the_cache_is_forgotten_without_requests() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await w.converge()
    calls = len(w.kube.calls)
    w.kube.remove(RAYCLUSTERS, "c")
    for pod in list(w.pods()):
        w.kube.remove(PODS, pod["metadata"]["name"])
    w.sync()
    result = await w.reconcile(KEY)
    assert result.requeue_after is None and len(w.kube.calls) == calls
    assert b'cluster="c"' not in w.registry.render()
