"""Ray's v2 provider on a GB200 NVLink group: a slice is 4 hosts sharing one NVLink clique."""

from __future__ import annotations

from typing import Any

HOSTS = 4
CLIQUE = "nvidia.com/gpu.clique"


def test_gpu_domain_launch_and_terminate(world: Any, ns: str, kit: Any) -> None:
    world.create_cluster(ns, kit.raycluster("nvl", kit.gpu_group("nvl", max_replicas=2)))
    types = world.autoscaling_config(ns, "nvl")["available_node_types"]
    assert types["nvl"]["resources"]["GPU"] == 4
    assert (types["nvl"]["min_workers"], types["nvl"]["max_workers"]) == (0, 2 * HOSTS)
    provider = world.v2_provider(ns, "nvl")

    provider.launch({"nvl": HOSTS}, "one-domain")
    assert provider.poll_errors() == []
    slices = world.wait_slices(ns, "nvl", "nvl", HOSTS, 1, running=True)
    members = slices[0]
    cliques = {
        world.call("GET", f"/api/v1/nodes/{p['spec']['nodeName']}")["metadata"]["labels"][CLIQUE]
        for p in members
    }
    assert len(cliques) == 1, f"one slice spread over NVLink domains {cliques}"

    names = {p["metadata"]["name"] for p in members}
    provider.terminate([sorted(names)[-1]], "drop-one-host")
    assert provider.poll_errors() == []
    assert world.get_cluster(ns, "nvl")["spec"]["workerGroupSpecs"][0]["replicas"] == 0
    world.wait("the whole domain deleting", lambda: not names & world.live_names(ns, "nvl"), 5)
    assert [n for n in provider.get_non_terminated().values() if n.node_type == "nvl"] == []
