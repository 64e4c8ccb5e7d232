"""Ray's domain-aware placement groups scale a GB200 group by whole NVLink domains.

A GB200 group of 2-host NVLink domains (4 GPUs a host, pretend: Ray counts them from
`nvidia.com/gpu`), autoscaler v2, `replicas: 0`. A driver in the head pod asks Ray 2.60 for
two placement groups of 2 x `{GPU: 4}` with `topology_strategy={"ray.io/gpu-domain":
"STRICT_PACK"}`, one after the other, holding the first. Ray's autoscaler adds one whole
domain for each (the operator's `ray.io/gpu-domain` label names the slice's ComputeDomain,
`<cluster>-<replica name>`, rules 3.4a and 13b, here without NVIDIA's driver), and each
placement group lands inside one domain, the two in different domains. Once released, the
domains go whole.
"""

from __future__ import annotations

from typing import Any

import pytest

from raycluster_operator.kube import RAYCLUSTERS
from tests.harness.ray_world import (
    REAL_RAY_MODULE,
    RESULT_MARK,
    RayWorld,
    eventually,
    labels_of,
    module_world,
    raycluster,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=100)]

NAME = "nvlscale"

PACK = f"""
from ray.util.placement_group import placement_group, placement_group_table
ray.init(address="auto", logging_level="ERROR")
domains = []
pgs = []
for _ in range(2):
    pg = placement_group([{{"GPU": 4}}, {{"GPU": 4}}],
                         topology_strategy={{"ray.io/gpu-domain": "STRICT_PACK"}})
    ray.get(pg.ready(), timeout=900)
    pgs.append(pg)
nodes = {{n["NodeID"]: n for n in ray.nodes() if n["Alive"]}}
for pg in pgs:
    placed = placement_group_table(pg)["bundles_to_node_id"].values()
    domains.append([nodes[n]["Labels"].get("ray.io/gpu-domain") for n in placed])
    domains[-1].append(len(set(placed)))
print("{RESULT_MARK}" + json.dumps(domains))
"""


def gpu_cluster() -> dict[str, Any]:
    cluster = raycluster(NAME, replicas=0, autoscaling=True, idle_timeout=10)
    group = cluster["spec"]["workerGroupSpecs"][0]
    group["groupName"] = "nvl"
    spec = group["template"]["spec"]
    spec.pop("nodeSelector")
    limits = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}
    spec["containers"][0]["resources"] = {"limits": limits}
    return cluster


world = module_world(["gpu:gb200:2:2", "cpu:1"])


async def test_domain_placement_groups_scale_by_whole_domains_and_stay_inside_one(
    world: RayWorld,
) -> None:
    await world.cluster.apply(gpu_cluster())
    head = await world.ray_up(NAME)
    first, second = await world.driver(head, PACK, seconds=1800)
    # Each placement group: both bundles in one domain, on two distinct hosts.
    assert first[2] == second[2] == 2
    assert len(set(first[:2])) == 1 and len(set(second[:2])) == 1
    group = (await world.kube.get(RAYCLUSTERS, "default", NAME))["spec"]["workerGroupSpecs"][0]
    assert group["replicas"] == 2
    workers = await world.workers(NAME)
    slices = {f"{NAME}-{labels_of(p)['ray.io/worker-group-replica-name']}" for p in workers}
    assert {first[0], second[0]} == slices and len(slices) == 2
    assert sorted(labels_of(p)["ray.io/worker-group-replica-index"] for p in workers) == [
        "0",
        "0",
        "1",
        "1",
    ]

    async def domains_gone() -> None:
        pods = await world.pods(NAME, live=False)
        assert [labels_of(p)["ray.io/node-type"] for p in pods] == ["head"]

    await eventually(domains_gone, within=300)
