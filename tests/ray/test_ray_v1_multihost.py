"""Ray's v1 `KubeRayNodeProvider` on a multi-host group.

v1 knows slices only through the `replicaIndex` label: terminating one host puts the whole
slice into workersToDelete. It counts pods, not slices, when it writes `replicas`; these tests
pin that behaviour down so the docs can say plainly that v2 is the autoscaler for multi-host.
"""

from __future__ import annotations

from typing import Any

from ray.autoscaler.tags import TAG_RAY_REPLICA_INDEX, TAG_RAY_USER_NODE_TYPE

HOSTS = 4


def _group(world: Any, ns: str, name: str) -> dict[str, Any]:
    return world.get_cluster(ns, name)["spec"]["workerGroupSpecs"][0]  # type: ignore[no-any-return]


def test_v1_expands_a_termination_to_the_slice(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("v1tpu", kit.tpu_group(replicas=2, max_replicas=2)))
    before = world.wait_slices(ns, "v1tpu", "tpu", HOSTS, 2, running=True)
    provider = world.v1_provider(ns, "v1tpu")
    provider.non_terminated_nodes({})
    assert provider.safe_to_scale()

    slice0 = {p["metadata"]["name"] for p in before[0]}
    victim = before[0][3]["metadata"]["name"]
    assert provider.node_tags(victim)[TAG_RAY_REPLICA_INDEX] == "tpu-0"
    provider.terminate_node(victim)
    provider.post_process()

    group = _group(world, ns, "v1tpu")
    assert set(group["scaleStrategy"]["workersToDelete"]) == slice0
    # v1 wanted 8 - 1 = 7 "replicas" (pods), capped at maxReplicas 2 == current: unchanged.
    assert group["replicas"] == 2
    world.wait("slice 0 terminating", lambda: not slice0 & world.live_names(ns, "v1tpu"), timeout=5)
    # replicas still says 2, so the operator replaces the slice v1 meant to remove.
    after = world.wait_slices(ns, "v1tpu", "tpu", HOSTS, 2)
    assert not slice0 & {p["metadata"]["name"] for m in after.values() for p in m}

    # Next update: nothing named is live, so v1 clears the list itself.
    provider.non_terminated_nodes({})
    assert provider.safe_to_scale()
    assert _group(world, ns, "v1tpu")["scaleStrategy"]["workersToDelete"] == []


def test_v1_launch_writes_pods_into_slice_replicas(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("v1up", kit.tpu_group(replicas=0, max_replicas=2)))
    world.wait("the head pod", lambda: world.pods(ns, "v1up"))
    provider = world.v1_provider(ns, "v1up")
    provider.non_terminated_nodes({})
    assert provider.safe_to_scale()

    # One slice's worth of nodes...
    provider.create_node({}, {TAG_RAY_USER_NODE_TYPE: "tpu"}, HOSTS)
    provider.post_process()

    # ...becomes replicas=4 slices, only held back by maxReplicas.
    assert _group(world, ns, "v1up")["replicas"] == 2
    world.wait_slices(ns, "v1up", "tpu", HOSTS, 2)
