"""Ray's v2 provider refuses to scale while a pod it named is still live.

The refusal covers every group, so an operator that is slow to delete (or cannot, here: the
API server fails pod deletes) stalls all autoscaling. Once the operator gets through, the
next request is accepted and clears the list.
"""

from __future__ import annotations

import time
from typing import Any

HOSTS = 4


def test_v2_waits_for_named_pods_then_resumes(world: Any, ns: str, kit: Any) -> None:
    cpu, tpu = kit.cpu_group(replicas=2), kit.tpu_group(replicas=1, max_replicas=2)
    world.create_cluster(ns, kit.raycluster("wait", cpu, tpu))
    world.wait_slices(ns, "wait", "tpu", HOSTS, 1)
    two = world.wait_workers(ns, "wait", "cpu", 2)
    provider = world.v2_provider(ns, "wait")
    victim, other = sorted(two)

    rule = world.cluster.faults.fail("delete", "pods", code=500)
    try:
        provider.terminate([victim], "first")
        assert provider.poll_errors() == []
        time.sleep(0.3)  # the operator tries, and fails, to delete it
        assert victim in world.live_names(ns, "wait")

        provider.launch({"tpu": HOSTS}, "blocked-launch")
        provider.terminate([other], "blocked-terminate")
        errors = provider.poll_errors()
        assert sorted(type(e).__name__ for e in errors) == ["LaunchNodeError", "TerminateNodeError"]
        assert all("Waiting for them to be deleted" in str(e) for e in errors)
        groups = world.get_cluster(ns, "wait")["spec"]["workerGroupSpecs"]
        assert (groups[0]["replicas"], groups[1]["replicas"]) == (1, 1)
    finally:
        world.cluster.faults.rules.remove(rule)

    # The operator's retry gets through; then Ray scales again and clears the list.
    world.wait("the victim terminating", lambda: victim not in world.live_names(ns, "wait"))
    provider.launch({"tpu": HOSTS}, "unblocked")
    assert provider.poll_errors() == []
    groups = world.get_cluster(ns, "wait")["spec"]["workerGroupSpecs"]
    assert groups[0]["scaleStrategy"]["workersToDelete"] == []
    assert (groups[0]["replicas"], groups[1]["replicas"]) == (1, 2)
    world.wait_slices(ns, "wait", "tpu", HOSTS, 2)
    assert world.live_names(ns, "wait", "cpu") == {other}
