"""A ComputeDomain per GB200 slice (docs/design.md §3.9, rule 13b), on the dev cluster with the
simulated NVIDIA DRA driver, checked with the real kubectl as a user would: 2 cliques of 4
GB200 hosts, a group of 2 slices x 4 hosts.

- each slice has its own ComputeDomain, Ready with its 4 nodes inside one clique, owned by
  the RayCluster; every pod claims its own slice's channel, allocated on its node;
- the slice counts ready only once its domain is Ready;
- a host deleted: its slice comes back with a fresh domain, the other slice's is untouched;
- a domain deleted by hand under its slice: the slice is replaced whole with a fresh domain;
- scaled to 0: no domain and no claim is left.

One clique is made the scheduler's first choice for every host (the other's hosts are half
used by a filler pod), and the operator creates both slices at once. kube-scheduler places
pods one at a time: without the slices' preference for a clique no other slice holds, both
slices' first hosts went to the emptier clique, two hosts each, and neither could finish
(docs/design.md §3.5).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube import addons_for
from tests.harness import control_planes
from tests.harness import manifests as m
from tests.harness.examples import example
from tests.harness.kubectl import Run, runner
from tests.harness.objects import Obj
from tests.harness.operator_world import World, eventually, raycluster, ready
from tests.harness.world import open_world

pytestmark = pytest.mark.control_planes

NODES = ["gpu:gb200:4:2", "cpu:1"]
NAME = "gb"
CLIQUE = "nvidia.com/gpu.clique"


@pytest.fixture
async def world(control_plane: str) -> AsyncIterator[World]:
    control_planes.require(control_plane)
    async with open_world(World, NODES, addons=addons_for(NODES), control_plane=control_plane) as w:
        yield w


def gb200_group(replicas: int) -> Obj:
    gpus = {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "4"}
    pod = m.template(
        m.container("ray-worker", requests=gpus, limits=gpus),
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-GB200"},
    )
    return m.worker_group("nvl", pod, replicas=replicas, min_replicas=0, max_replicas=2, hosts=4)


async def kubectl_json(run: Run, *args: str) -> Any:
    done = await run(*args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def domains_of(run: Run) -> list[Obj]:
    listing = await kubectl_json(run, "get", "computedomains.resource.nvidia.com")
    return list(listing["items"])


async def claims_of(run: Run) -> list[Obj]:
    return list((await kubectl_json(run, "get", "resourceclaims"))["items"])


def filler(node: str) -> Obj:
    """Half a GB200 host's CPU and memory, on that node: the scheduler's least-allocated
    score then ranks its clique below the other for every slice host."""
    half = {"cpu": "72", "memory": "440Gi"}
    pod = m.template(
        m.container("filler", requests=half, limits=half),
        nodeName=node,
        tolerations=[{"operator": "Exists"}],
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"filler-{node}", "namespace": "default"},
        **pod,
    }


async def tilt_one_clique(world: World, run: Run) -> None:
    nodes = (await kubectl_json(run, "get", "nodes"))["items"]
    cliques = sorted(
        {n["metadata"]["labels"][CLIQUE] for n in nodes if CLIQUE in n["metadata"]["labels"]}
    )
    for node in nodes:
        if node["metadata"]["labels"].get(CLIQUE) == cliques[0]:
            await world.apply(filler(node["metadata"]["name"]))


async def serving(world: World, run: Run, slices: int) -> tuple[list[Obj], list[Obj]]:
    """`slices` slices whose domains are Ready and whose pods are ready, with their checks."""
    pods = [p for p in await world.workers(NAME) if ready(p)]
    assert len(pods) == 4 * slices
    domains = [d for d in await domains_of(run) if not d["metadata"].get("deletionTimestamp")]
    assert len(domains) == slices
    assert all(d["status"]["status"] == "Ready" for d in domains)
    cluster = await world.get_cluster(NAME)
    assert cluster["status"]["readyWorkerReplicas"] == 4 * slices
    return pods, domains


def check_domains(
    pods: list[Obj], domains: list[Obj], claims: list[Obj], nodes: dict[str, Obj]
) -> None:
    by_name = {d["metadata"]["name"]: d for d in domains}
    by_claim = {c["metadata"]["name"]: c for c in claims}
    for domain in domains:
        assert domain["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
        members = domain["status"]["nodes"]
        assert len(members) == 4
        assert len({nodes[n["name"]]["metadata"]["labels"][CLIQUE] for n in members}) == 1
    for pod in pods:
        replica = pod["metadata"]["labels"]["ray.io/worker-group-replica-name"]
        domain = by_name[f"{NAME}-{replica}"]
        entry = pod["spec"]["resourceClaims"]
        assert entry == [
            {"name": "compute-domain-channel", "resourceClaimTemplateName": f"{NAME}-{replica}"}
        ]
        assert pod["spec"]["containers"][0]["resources"]["claims"] == [
            {"name": "compute-domain-channel"}
        ]
        claim = by_claim[pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]]
        config = claim["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]
        assert config["domainID"] == domain["metadata"]["uid"]
        result = claim["status"]["allocation"]["devices"]["results"][0]
        assert result["device"] == "channel-0"
        assert result["pool"] == pod["spec"]["nodeName"]
        assert pod["spec"]["nodeName"] in {n["name"] for n in domain["status"]["nodes"]}
        assert f"ray.io/gpu-domain={NAME}-{replica}" in " ".join(
            pod["spec"]["containers"][0]["args"]
        )


async def test_a_compute_domain_per_slice(world: World, tmp_path: Path) -> None:
    config = tmp_path / "admin"
    config.write_text(yaml.safe_dump(world.cluster.kubeconfig_dict()))
    run = runner(config)
    await tilt_one_clique(world, run)
    await world.start_operator()
    await world.apply(raycluster(NAME, [gb200_group(replicas=2)]))

    pods, domains = await eventually(lambda: serving(world, run, 2), within=120)
    nodes = {n["metadata"]["name"]: n for n in (await kubectl_json(run, "get", "nodes"))["items"]}
    claims = await claims_of(run)
    check_domains(pods, domains, claims, nodes)
    if world.cluster.control_plane == control_planes.KUBERNETES:
        # Allocated by kube-scheduler's DRA plugin from the driver's ResourceSlices.
        shown = await kubectl_json(run, "get", "resourceclaims", "--show-managed-fields")
        for claim in shown["items"]:
            writers = {
                (f["manager"], f.get("subresource")) for f in claim["metadata"]["managedFields"]
            }
            assert ("kube-scheduler", "status") in writers, writers
    cliques = {
        frozenset(nodes[n["name"]]["metadata"]["labels"][CLIQUE] for n in d["status"]["nodes"])
        for d in domains
    }
    assert len(cliques) == 2  # one clique each

    # A host deleted: its slice is replaced whole with a fresh domain; the other's stays.
    victim = pods[0]
    replica = victim["metadata"]["labels"]["ray.io/worker-group-replica-name"]
    lost = f"{NAME}-{replica}"
    kept = next(d for d in domains if d["metadata"]["name"] != lost)
    done = await run("delete", "pod", victim["metadata"]["name"], "--wait=false")
    assert done.returncode == 0, done.stderr

    async def replaced() -> tuple[list[Obj], list[Obj]]:
        pods, domains = await serving(world, run, 2)
        names = {d["metadata"]["name"] for d in domains}
        assert lost not in names
        assert kept["metadata"]["name"] in names
        return pods, domains

    pods, domains = await eventually(replaced, within=120)
    now_kept = next(d for d in domains if d["metadata"]["name"] == kept["metadata"]["name"])
    assert now_kept["metadata"]["uid"] == kept["metadata"]["uid"]
    assert now_kept["metadata"]["generation"] == kept["metadata"]["generation"]
    check_domains(pods, domains, await claims_of(run), nodes)

    # A domain deleted by hand under its running slice: the slice is replaced whole
    # (ComputeDomainLost) with a fresh domain; the other slice's domain is untouched.
    gone, other = domains[0], domains[1]
    done = await run("delete", "computedomain", gone["metadata"]["name"], "--wait=false")
    assert done.returncode == 0, done.stderr

    async def rebuilt() -> tuple[list[Obj], list[Obj]]:
        pods, domains = await serving(world, run, 2)
        uids = {d["metadata"]["uid"] for d in domains}
        assert gone["metadata"]["uid"] not in uids and other["metadata"]["uid"] in uids
        return pods, domains

    pods, domains = await eventually(rebuilt, within=120)
    check_domains(pods, domains, await claims_of(run), nodes)
    events = await kubectl_json(
        run, "get", "events", "--field-selector", "reason=ComputeDomainLost"
    )
    assert any(gone["metadata"]["name"] in e["message"] for e in events["items"])

    # Scale to 0: no domain, no claim, no claim template left.
    await world.patch_spec(NAME, {"workerGroupSpecs": [gb200_group(replicas=0)]})

    async def nothing_left() -> None:
        assert await world.workers(NAME) == []
        assert await domains_of(run) == []
        assert await claims_of(run) == []
        templates = await kubectl_json(run, "get", "resourceclaimtemplates")
        assert templates["items"] == []

    await eventually(nothing_left, within=120)


async def test_without_the_driver_slices_run_without_domains_and_say_so(tmp_path: Path) -> None:
    """No ComputeDomain served: the operator still runs, the slice is created without a
    channel claim and becomes ready, and a ComputeDomainsUnavailable Warning says why."""
    nodes = ["gpu:gb200:4:1", "cpu:1"]
    async with open_world(World, nodes) as world:
        config = tmp_path / "admin"
        config.write_text(yaml.safe_dump(world.cluster.kubeconfig_dict()))
        run = runner(config)
        await world.start_operator()
        await world.apply(raycluster(NAME, [gb200_group(replicas=1)]))

        async def serving_without() -> list[Obj]:
            pods = [p for p in await world.workers(NAME) if ready(p)]
            assert len(pods) == 4
            return pods

        pods = await eventually(serving_without, within=120)
        assert all("resourceClaims" not in p["spec"] for p in pods)
        events = await kubectl_json(
            run, "get", "events", "--field-selector", "reason=ComputeDomainsUnavailable"
        )
        assert events["items"] and events["items"][0]["type"] == "Warning"
        assert "does not serve resource.nvidia.com/v1beta1 ComputeDomains" in (
            events["items"][0].get("note") or events["items"][0].get("message", "")
        )


async def test_the_gb200_example_gets_its_compute_domain(tmp_path: Path) -> None:
    """examples/gb200-nvl-18.yaml applied with kubectl, as its header says, on a dev cluster
    with one 18-host GB200 clique: the slice's domain is Ready with all 18 hosts, every pod
    claims its channel, and the slice counts ready."""
    nodes = ["gpu:gb200:18:1", "cpu:1"]
    async with open_world(World, nodes, addons=addons_for(nodes)) as world:
        config = tmp_path / "admin"
        config.write_text(yaml.safe_dump(world.cluster.kubeconfig_dict()))
        run = runner(config)
        await world.start_operator()
        done = await run("apply", "-f", str(example("gb200-nvl-18")))
        assert done.returncode == 0, done.stderr

        async def serving_with_domain() -> tuple[list[Obj], Obj]:
            pods = [p for p in await world.workers("gb200") if ready(p)]
            assert len(pods) == 18
            (domain,) = await domains_of(run)
            assert domain["status"]["status"] == "Ready"
            assert len(domain["status"]["nodes"]) == 18
            cluster = await world.get_cluster("gb200")
            assert cluster["status"]["workerGroups"][0]["readySlices"] == 1
            return pods, domain

        pods, domain = await eventually(serving_with_domain, within=120)
        for pod in pods:
            (entry,) = pod["spec"]["resourceClaims"]
            assert entry["resourceClaimTemplateName"] == domain["metadata"]["name"]
