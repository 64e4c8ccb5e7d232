"""The reconciler over a fake API: whole slices in, whole slices out, each with its reason."""

from __future__ import annotations

from fake_kube import World, cpu_group, raycluster, tpu_group

from raycluster_operator.kube import PODS, RAYCLUSTERS


def world_with(*groups: dict, **spec: object) -> World:
    w = World()
    w.kube.put(RAYCLUSTERS, raycluster(*groups, **spec))
    w.sync()
    return w


async def test_one_pass_creates_the_head_and_whole_slices() -> None:
    w = world_with(tpu_group(replicas=2), cpu_group(replicas=1))
    await w.reconcile()
    slices = w.slices("tpu")
    assert len(slices) == 2 and all(hosts == [0, 1, 2, 3] for hosts in slices.values())
    assert len(w.pods("cpu")) == 1
    assert len(w.pods("headgroup")) == 1
    assert w.metrics.pods_created.labels("ScaleUp")._value.get() == 9
    assert w.metrics.pods_created.labels("HeadMissing")._value.get() == 1


async def test_create_events_are_one_per_replica_and_carry_the_create_action() -> None:
    w = world_with(tpu_group(replicas=2))
    await w.reconcile()
    events = w.events("ScaleUp")
    assert len(events) == 2  # per replica, not per pod
    assert all(e["action"] == "CreatePod" and e["type"] == "Normal" for e in events)
    assert "(4 hosts)" in events[0]["message"]


async def test_a_converged_cluster_costs_no_writes() -> None:
    w = world_with(tpu_group(replicas=1), cpu_group(replicas=2))
    await w.converge()
    writes = w.kube.writes
    for _ in range(3):
        assert await w.step() == 0
    assert w.kube.writes == writes


async def test_a_slice_that_lost_a_host_is_deleted_whole_then_replaced() -> None:
    w = world_with(tpu_group(replicas=1))
    await w.converge()
    (first,) = w.slices("tpu")
    lost = next(
        p for p in w.pods("tpu") if p["metadata"]["labels"]["ray.io/replica-host-index"] == "2"
    )
    w.kube.remove(PODS, lost["metadata"]["name"])
    assert await w.step() > 0
    assert w.pods("tpu") == []  # the other three hosts went with it
    assert w.metrics.pods_deleted.labels("ReplicaIncomplete")._value.get() == 3
    (event,) = w.events("ReplicaIncomplete")
    assert event["type"] == "Warning" and event["action"] == "DeletePod"
    assert "(3 pods)" in event["message"]
    await w.converge()
    (second,) = w.slices("tpu")
    assert second != first and w.slices("tpu")[second] == [0, 1, 2, 3]


async def test_a_failed_host_takes_its_whole_slice_with_the_reason() -> None:
    w = world_with(tpu_group(replicas=2))
    await w.converge()
    victim = w.pods("tpu")[0]
    doomed = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    victim["status"] = {"phase": "Failed"}
    w.kube.put(PODS, victim)
    await w.step()
    assert doomed not in w.slices("tpu")
    assert len(w.slices("tpu")) == 1  # the healthy slice is untouched
    assert w.metrics.pods_deleted.labels("HostFailed")._value.get() == 4
    assert [e["type"] for e in w.events("HostFailed")] == ["Warning"]


async def test_scale_down_removes_the_highest_index_as_requested() -> None:
    w = world_with(cpu_group(replicas=3))
    await w.converge()
    cluster = w.cluster()
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    w.kube.put(RAYCLUSTERS, cluster)
    await w.converge()
    indices = [p["metadata"]["labels"]["ray.io/worker-group-replica-index"] for p in w.pods("cpu")]
    assert indices == ["0"]
    assert w.metrics.pods_deleted.labels("ScaleDown")._value.get() == 2
    assert all(e["type"] == "Normal" for e in w.events("ScaleDown"))


async def test_the_next_pass_waits_for_the_cache_to_show_the_creates() -> None:
    w = world_with(cpu_group(replicas=2))
    await w.reconcile()
    writes = w.kube.writes
    result = await w.reconcile()  # nothing synced: the cache does not show the new pods
    assert result.requeue_after is not None and result.requeue_after > 0
    assert w.kube.writes == writes
    w.sync()
    assert (await w.reconcile()).requeue_after is None


async def test_a_delete_of_a_replaced_pod_is_refused_by_its_uid_and_not_an_error() -> None:
    w = world_with(cpu_group(replicas=2))
    await w.converge()
    cluster = w.cluster()
    cluster["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    w.kube.put(RAYCLUSTERS, cluster)
    w.sync()
    # Between the cache and the server, the pod to delete was replaced by a namesake.
    target = max(
        w.pods("cpu"), key=lambda p: p["metadata"]["labels"]["ray.io/worker-group-replica-index"]
    )
    target["metadata"]["uid"] = "someone-else"
    w.kube.put(PODS, target)
    await w.reconcile()  # no ReconcileError: Conflict means nothing of ours is left there
    assert target["metadata"]["name"] in w.kube.writes_of("delete", "pods")
    assert w.kube.get_obj(PODS, target["metadata"]["name"]) is not None
