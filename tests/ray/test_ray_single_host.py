"""Ray's v2 and v1 providers on a single-host group: launch, terminate, list cleared."""

from __future__ import annotations

import time
from typing import Any

from ray.autoscaler.tags import (
    TAG_RAY_NODE_STATUS,
    TAG_RAY_REPLICA_INDEX,
    TAG_RAY_USER_NODE_TYPE,
)


def _group(world: Any, ns: str, name: str) -> dict[str, Any]:
    return world.get_cluster(ns, name)["spec"]["workerGroupSpecs"][0]  # type: ignore[no-any-return]


def _live(world: Any, ns: str, name: str, kit: Any) -> set[str]:
    return {p["metadata"]["name"] for p in kit.workers(world.pods(ns, name), "cpu")}


def _running(world: Any, ns: str, name: str, kit: Any, count: int) -> set[str] | None:
    pods = kit.workers(world.pods(ns, name), "cpu")
    if len(pods) == count and all(kit.is_running(p) for p in pods):
        return {p["metadata"]["name"] for p in pods}
    return None


def test_v2_single_host(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("v2", kit.cpu_group("cpu", max_replicas=4)))
    provider = world.v2_provider(ns, "v2")

    provider.launch({"cpu": 3}, "up")
    assert provider.poll_errors() == []
    assert _group(world, ns, "v2")["replicas"] == 3
    three = world.wait("three running workers", lambda: _running(world, ns, "v2", kit, 3))
    indices = sorted(
        int(kit.labels(p)[kit.REPLICA_INDEX]) for p in kit.workers(world.pods(ns, "v2"), "cpu")
    )
    assert indices == [0, 1, 2]
    assert {i for i, n in provider.get_non_terminated().items() if n.node_type == "cpu"} == three

    victim = sorted(three)[0]
    provider.terminate([victim], "down")
    assert provider.poll_errors() == []
    group = _group(world, ns, "v2")
    assert (group["replicas"], group["scaleStrategy"]["workersToDelete"]) == (2, [victim])
    world.wait(
        "the victim terminating", lambda: victim not in world.live_names(ns, "v2"), timeout=5
    )
    assert _live(world, ns, "v2", kit) == three - {victim}

    # The next request clears the list; nothing else is deleted, one pod is added.
    provider.launch({"cpu": 1}, "up-again")
    assert provider.poll_errors() == []
    group = _group(world, ns, "v2")
    assert (group["replicas"], group["scaleStrategy"]["workersToDelete"]) == (3, [])
    final = world.wait("three running workers again", lambda: _running(world, ns, "v2", kit, 3))
    assert three - {victim} <= final
    assert victim not in final


def _v1_iteration(provider: Any) -> list[str]:
    """The provider calls of one StandardAutoscaler update, up to its scaling decisions."""
    nodes: list[str] = provider.non_terminated_nodes({})
    assert provider.safe_to_scale()
    return nodes


def test_v1_single_host(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("v1", kit.cpu_group("cpu", max_replicas=4)))
    provider = world.v1_provider(ns, "v1")
    world.wait("the head pod", lambda: world.pods(ns, "v1"))

    _v1_iteration(provider)
    provider.create_node({}, {TAG_RAY_USER_NODE_TYPE: "cpu"}, 3)
    provider.post_process()
    assert _group(world, ns, "v1")["replicas"] == 3
    three = world.wait("three running workers", lambda: _running(world, ns, "v1", kit, 3))

    nodes = _v1_iteration(provider)
    assert three <= set(nodes)
    assert all(provider.node_tags(n)[TAG_RAY_NODE_STATUS] == "up-to-date" for n in three)
    # Single-host pods carry no replicaIndex: v1 terminates exactly the pod it names.
    assert not any(TAG_RAY_REPLICA_INDEX in provider.node_tags(n) for n in three)
    victim = sorted(three)[1]
    provider.terminate_node(victim)
    provider.post_process()
    group = _group(world, ns, "v1")
    assert (group["replicas"], group["scaleStrategy"]["workersToDelete"]) == (2, [victim])
    world.wait(
        "the victim terminating", lambda: victim not in world.live_names(ns, "v1"), timeout=5
    )

    # Next update: safe_to_scale sees the victim gone and clears the list itself.
    nodes = _v1_iteration(provider)
    assert victim not in nodes
    provider.post_process()
    group = _group(world, ns, "v1")
    assert (group["replicas"], group["scaleStrategy"]["workersToDelete"]) == (2, [])
    # Nothing is re-deleted or re-created afterwards.
    time.sleep(0.5)
    assert _live(world, ns, "v1", kit) == three - {victim}
