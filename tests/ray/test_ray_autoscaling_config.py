"""The autoscaling config Ray's `AutoscalingConfigProducer` derives from our RayCluster."""

from __future__ import annotations

from typing import Any


def test_tpu_and_cpu_groups_become_node_types(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(
        ns,
        kit.raycluster(
            "cfg",
            kit.tpu_group("tpu", min_replicas=1, max_replicas=3, hosts=4),
            kit.cpu_group("cpu", min_replicas=0, max_replicas=5),
        ),
    )

    config = world.autoscaling_config(ns, "cfg")

    assert config["cluster_name"] == "cfg"
    assert config["provider"]["type"] == "kuberay"
    assert config["provider"]["namespace"] == ns
    assert config["head_node_type"] == "headgroup"
    types = config["available_node_types"]
    assert set(types) == {"headgroup", "tpu", "cpu"}
    # Slices times hosts: Ray's node types count pods.
    assert (types["tpu"]["min_workers"], types["tpu"]["max_workers"]) == (4, 12)
    assert (types["cpu"]["min_workers"], types["cpu"]["max_workers"]) == (0, 5)
    assert (types["headgroup"]["min_workers"], types["headgroup"]["max_workers"]) == (0, 0)
    assert config["max_workers"] == 12 + 5
    # One v6e 4x4 slice = 16 chips = "v6e-16"; each host has 4 chips; worker 0 of each
    # slice advertises the slice head resource Ray's TPU scheduling asks for.
    assert types["tpu"]["resources"] == {
        "CPU": 1,
        "TPU": 4,
        "TPU-v6e-16-head": 1,
        "memory": 1024**3,
    }
    assert types["cpu"]["resources"] == {"CPU": 1, "memory": 1024**3}
    assert types["headgroup"]["resources"]["CPU"] == 1


def test_v4_slice_head_resource(world: Any, ns: str, kit: Any) -> None:
    group = kit.tpu_group(
        "v4", hosts=4, topology="2x2x4", accelerator="tpu-v4-podslice", chips=4, max_replicas=1
    )
    world.create_cluster(ns, kit.raycluster("v4", group))

    types = world.autoscaling_config(ns, "v4")["available_node_types"]

    # v4 has 2 cores per chip: 16 chips -> "v4-32".
    assert types["v4"]["resources"]["TPU-v4-32-head"] == 1
    assert types["v4"]["max_workers"] == 4


def test_replica_bounds_defaulted_by_the_crd(world: Any, ns: str, kit: Any) -> None:
    """Ray reads minReplicas/maxReplicas with `[...]`: the CRD must default them."""
    group = kit.cpu_group("cpu")
    for key in ("replicas", "minReplicas", "maxReplicas"):
        del group[key]
    world.create_cluster(ns, kit.raycluster("bare", group))

    stored = world.get_cluster(ns, "bare")["spec"]["workerGroupSpecs"][0]
    types = world.autoscaling_config(ns, "bare")["available_node_types"]

    assert stored["minReplicas"] == 0
    assert types["cpu"]["min_workers"] == 0
    assert types["cpu"]["max_workers"] == stored["maxReplicas"] == 2**31 - 1


def test_v2_scales_a_group_created_without_replicas(world: Any, ns: str, kit: Any) -> None:
    """v2 reads `replicas` and `minReplicas` with `[...]`: both must be defaulted."""
    group = kit.cpu_group("cpu", max_replicas=3)
    del group["replicas"]
    world.create_cluster(ns, kit.raycluster("norep", group))
    provider = world.v2_provider(ns, "norep")

    provider.launch({"cpu": 1}, "one")

    assert [str(e) for e in provider.poll_errors()] == []
    assert world.get_cluster(ns, "norep")["spec"]["workerGroupSpecs"][0]["replicas"] == 1
