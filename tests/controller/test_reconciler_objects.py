"""The reconciler over a fake API: services, the autoscaler's RBAC and the status."""

from __future__ import annotations

from fake_kube import World, cpu_group, names, raycluster, tpu_group

from raycluster_operator.kube import (
    PODS,
    RAYCLUSTERS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
)

RBAC = (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)


def autoscaling_world() -> World:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1), enableInTreeAutoscaling=True))
    return w


async def test_services_come_from_the_plan_headless_only_for_multi_host() -> None:
    single = World()
    single.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await single.converge()
    assert names(single.kube.of_kind(SERVICES)) == ["c-head-svc"]

    multi = World()
    multi.kube.put(RAYCLUSTERS, raycluster(tpu_group(replicas=1)))
    await multi.converge()
    assert names(multi.kube.of_kind(SERVICES)) == ["c-head-svc", "c-headless"]


async def test_a_deleted_service_is_created_again_and_no_pod_is_touched() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await w.converge()
    w.kube.remove(SERVICES, "c-head-svc")
    calls = len(w.kube.calls)
    await w.step()
    assert [c for c in w.kube.calls[calls:] if c[1] != "rayclusters/status"] == [
        ("create", "services", "c-head-svc")
    ]


async def test_a_service_the_cache_has_not_shown_yet_is_not_created_twice() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    w.sync()
    await w.reconcile()
    w.sync(PODS.plural)  # the pods reach the cache, the service not yet
    await w.reconcile()
    assert w.kube.writes_of("create", "services") == ["c-head-svc"]


async def test_a_same_named_service_of_someone_else_is_not_replaced() -> None:
    w = World()
    w.kube.put(SERVICES, {"metadata": {"name": "c-head-svc"}, "spec": {}})
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await w.converge()
    assert w.kube.writes_of("create", "services") == []


async def test_the_autoscalers_rbac_is_created_from_the_plan() -> None:
    w = autoscaling_world()
    await w.converge()
    for kind in RBAC:
        (obj,) = w.kube.of_kind(kind)
        assert obj["metadata"]["name"] == "c"
        assert obj["metadata"]["labels"]["ray.io/cluster"] == "c"
    assert await w.step() == 0


async def test_a_deleted_rbac_object_is_healed_by_the_next_pass() -> None:
    w = autoscaling_world()
    await w.converge()
    w.kube.remove(ROLES, "c")
    calls = len(w.kube.calls)
    await w.step()
    assert w.kube.calls[calls:] == [("create", "roles", "c")]


async def test_an_rbac_object_the_cache_cannot_see_is_not_asked_for_every_pass() -> None:
    w = autoscaling_world()
    # Same name, without the operator's label: not in the (label-selected) cache, not ours.
    w.kube.put(SERVICE_ACCOUNTS, {"metadata": {"name": "c"}})
    await w.converge()
    await w.step()
    await w.step()
    assert w.kube.writes_of("create", "serviceaccounts") == ["c"]  # AlreadyExists, once


async def test_the_status_goes_through_the_subresource_and_the_spec_is_never_written() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    spec = w.cluster()["spec"]
    await w.converge()
    assert w.kube.writes_of("patch", "rayclusters/status")
    assert [c for c in w.kube.calls if c[1] == "rayclusters"] == []
    assert w.cluster()["spec"] == spec
    statuses = len(w.kube.writes_of("patch", "rayclusters/status"))
    await w.step()
    assert len(w.kube.writes_of("patch", "rayclusters/status")) == statuses


async def test_a_status_written_is_not_written_again_before_the_cache_shows_it() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(cpu_group(replicas=1)))
    await w.converge()
    head = w.pods("headgroup")[0]
    head["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    w.kube.put(PODS, head)
    before = len(w.kube.writes_of("patch", "rayclusters/status"))
    assert await w.step() == 1  # the head is ready: one status write
    w.sync(PODS.plural, SERVICES.plural)  # the cached cluster does not show that write yet
    await w.reconcile()
    await w.reconcile()
    assert len(w.kube.writes_of("patch", "rayclusters/status")) == before + 1
    assert w.events("HeadPodReady") == []


async def test_the_status_follows_the_pods() -> None:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(tpu_group(replicas=1)))
    await w.converge()
    statuses = len(w.kube.writes_of("patch", "rayclusters/status"))
    for pod in w.pods():
        pod["status"] = {
            "phase": "Running",
            "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        w.kube.put(PODS, pod)
    await w.converge()
    status = w.cluster()["status"]
    assert status["readyWorkerSlices"] == 1 and status["state"] == "ready"
    assert len(w.kube.writes_of("patch", "rayclusters/status")) == statuses + 1
