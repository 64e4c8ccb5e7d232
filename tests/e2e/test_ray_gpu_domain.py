"""A 2-host GB200 NVLink domain becomes Ray nodes that a placement group can pin to the domain.

GPUs are pretend (Ray takes `--num-gpus` from the `nvidia.com/gpu` limit when no
CUDA_VISIBLE_DEVICES says otherwise); what is real is Ray's view: both hosts carry the
`ray.io/gpu-domain` label the operator passes, naming the slice's ComputeDomain (rule 13b,
with the simulated NVIDIA DRA driver), and a placement group selecting that label spreads over
exactly the domain's hosts; each host sees its IMEX channel where the driver puts it.
"""

from __future__ import annotations

from typing import Any

import pytest

from devkube import addons_for
from tests.harness.ray_world import (
    REAL_RAY_MODULE,
    RESULT_MARK,
    RayWorld,
    eventually,
    module_world,
    raycluster,
)

pytestmark = [*REAL_RAY_MODULE, pytest.mark.slow(seconds=35)]

NAME = "nvl"

PIN = f"""
from ray.util.placement_group import placement_group, placement_group_table
ray.init(address="auto", logging_level="ERROR")
nodes = [n for n in ray.nodes() if n["Alive"]]
domain = {{n["NodeID"]: n["Labels"].get("ray.io/gpu-domain") for n in nodes}}
wanted = next(d for d in domain.values() if d)
pg = placement_group([{{"GPU": 4}}, {{"GPU": 4}}], strategy="STRICT_SPREAD",
                     bundle_label_selector=[{{"ray.io/gpu-domain": wanted}}] * 2)
ray.get(pg.ready(), timeout=120)
placed = list(placement_group_table(pg)["bundles_to_node_id"].values())
print("{RESULT_MARK}" + json.dumps({{
    "gpus": sorted(n["Resources"].get("GPU", 0) for n in nodes),
    "domains": sorted(str(d) for d in domain.values()),
    "placed": sorted(str(domain[n]) for n in placed),
    "distinct": len(set(placed)),
}}))
"""


def gpu_cluster() -> dict[str, Any]:
    cluster = raycluster(NAME)
    group = cluster["spec"]["workerGroupSpecs"][0]
    group["groupName"] = "nvl"
    spec = group["template"]["spec"]
    # GB200 nodes: a ComputeDomain per slice (rule 13b).
    spec["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
    limits = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}
    spec["containers"][0]["resources"] = {"limits": limits}
    return cluster


GB200 = ["gpu:gb200:2:1", "cpu:1"]
world = module_world(GB200, addons=addons_for(GB200))


async def test_the_domain_hosts_are_gpu_ray_nodes_a_placement_group_can_select(
    world: RayWorld,
) -> None:
    await world.cluster.apply(gpu_cluster())
    head = await world.ray_up(NAME, workers=2)

    workers = await world.workers(NAME)
    replica = workers[0]["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    domain = f"{NAME}-{replica}"  # the slice's ComputeDomain

    async def pinned() -> dict[str, object]:
        result: dict[str, object] = await world.driver(head, PIN)
        assert result["domains"] == ["None", domain, domain], result  # the head has none
        return result

    result = await eventually(pinned, within=180)
    assert result["gpus"] == [0, 4.0, 4.0]
    assert result["placed"] == [domain, domain]
    assert result["distinct"] == 2
    cd = await world.cluster.client.get(
        f"/apis/resource.nvidia.com/v1beta1/namespaces/default/computedomains/{domain}"
    )
    assert cd["status"]["status"] == "Ready"
    assert {n["name"] for n in cd["status"]["nodes"]} == {p["spec"]["nodeName"] for p in workers}
    for pod in workers:
        sandbox = world.process_pod(pod["metadata"]["name"]).sandbox
        code, out = await sandbox.exec(
            ["ls", "/dev/nvidia-caps-imex-channels"], {"PATH": "/usr/bin:/bin"}, "/", 30
        )
        assert (code, out.decode().split()) == (0, ["channel0"])
