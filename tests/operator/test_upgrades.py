"""Upgrades end to end (docs/design.md §4, rule 12a): the real kubectl patches a RayCluster's
image on the dev cluster (simulated runtime) and the pods list is sampled throughout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kuberay_crd import kuberay_crd
from parity_kubectl import Kubectl

from raycluster_operator.kube import PODS, Gone, KubeError
from tests.harness.kubectl import run_kubectl
from tests.harness.operator_world import (
    NODES,
    SharedWorld,
    World,
    cpu_group,
    eventually,
    labels_of,
    raycluster,
    ready,
    running_world,
)

# One world for the tests that need none of their own (tests/operator/conftest.py).
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.control_planes]

HASH = "ray.io/pod-template-hash"
OLD = "rayproject/ray:2.60.0"
NEW = "rayproject/ray:2.61.0"
IMAGE_PATH = "/spec/workerGroupSpecs/0/template/spec/containers/0/image"


def template(pod: dict[str, Any]) -> str | None:
    annotations: dict[str, str] = pod["metadata"].get("annotations") or {}
    return annotations.get(HASH)


def replica(pod: dict[str, Any]) -> str:
    return labels_of(pod).get("ray.io/worker-group-replica-name", "")


def is_worker(pod: dict[str, Any]) -> bool:
    return labels_of(pod).get("ray.io/node-type") == "worker"


@dataclass
class Samples:
    """Every state of the pods: ready whole slices, and slices seen mixing templates."""

    ready_slices: list[int] = field(default_factory=list)
    mixed: set[str] = field(default_factory=set)
    seen_hashes: set[str | None] = field(default_factory=set)
    #: Every pod (head included) ever seen.
    uids: set[str] = field(default_factory=set)


@contextlib.asynccontextmanager
async def sampling(world: World, cluster: str, hosts: int) -> AsyncIterator[Samples]:
    """Samples every state of the cluster's pods: a watch, the whole set checked after each
    event (a list every 20 ms cost the file a third of its CPU and saw only some states)."""
    samples = Samples()

    def sample(every: list[dict[str, Any]]) -> None:
        samples.uids |= {p["metadata"]["uid"] for p in every}
        pods = [p for p in every if is_worker(p)]
        by_slice: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            by_slice.setdefault(replica(pod), []).append(pod)
            samples.seen_hashes.add(template(pod))
        whole = 0
        for name, members in by_slice.items():
            if len({template(p) for p in members}) > 1:
                samples.mixed.add(name)
            live = [p for p in members if not p["metadata"].get("deletionTimestamp")]
            if len(live) == hosts and all(ready(p) for p in live):
                whole += 1
        samples.ready_slices.append(whole)

    async def watch() -> None:
        selector = f"ray.io/cluster={cluster}"
        pods: dict[str, dict[str, Any]] = {}
        rv = ""
        while True:
            try:
                if not rv:
                    listing = await world.kube.list(PODS, "default", label_selector=selector)
                    pods = {p["metadata"]["name"]: p for p in listing.items}
                    sample(list(pods.values()))
                    rv = listing.resource_version
                async for etype, obj in world.kube.watch(
                    PODS, "default", resource_version=rv, label_selector=selector
                ):
                    rv = obj.get("metadata", {}).get("resourceVersion") or rv
                    if etype == "DELETED":
                        pods.pop(obj["metadata"]["name"], None)
                    elif etype in ("ADDED", "MODIFIED"):
                        pods[obj["metadata"]["name"]] = obj
                    else:
                        continue
                    sample(list(pods.values()))
            except Gone:
                rv = ""
            except KubeError:
                await asyncio.sleep(0.05)

    task = asyncio.create_task(watch())
    try:
        yield samples
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def patch_image(kubectl: Kubectl, cluster: str, image: str) -> None:
    await kubectl.patch_json(
        "raycluster", cluster, [{"op": "replace", "path": IMAGE_PATH, "value": image}]
    )


async def settled(kubectl: Kubectl, cluster: str, slices: int, hosts: int) -> list[Any]:
    async def check() -> list[Any]:
        pods = await kubectl.pods(cluster)
        workers = [p for p in pods if is_worker(p)]
        assert len(workers) == slices * hosts, len(workers)
        assert all(ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods)
        assert len(pods) == slices * hosts + 1
        return pods

    result: list[Any] = await eventually(check, within=60)
    return result


async def rolling_cluster(
    kubectl: Kubectl, name: str, rolling: dict[str, Any], replicas: int = 3
) -> list[Any]:
    obj = raycluster(name, [cpu_group("g", replicas=replicas, hosts=4)])
    obj["spec"]["upgradeStrategy"] = {"type": "RollingUpdate", "rollingUpdate": rolling}
    await kubectl.apply(obj)
    return await settled(kubectl, name, replicas, 4)


async def finished(kubectl: Kubectl, name: str, before: list[Any]) -> list[Any]:
    """12 pods of one new template, none of the old ones left, at indices 0..2 or wherever."""
    old = {template(p) for p in before if is_worker(p)}

    async def check() -> list[Any]:
        pods = await settled(kubectl, name, 3, 4)
        workers = [p for p in pods if is_worker(p)]
        hashes = {template(p) for p in workers}
        assert len(hashes) == 1 and not hashes & old, hashes
        status = (await kubectl.json("get", "raycluster", name))["status"]
        assert status["workerGroups"][0]["updatedSlices"] == 3
        rolling = {c["type"]: c for c in status["conditions"]}["RollingUpdate"]
        assert (rolling["status"], rolling["reason"]) == ("False", "Complete")
        return workers

    result: list[Any] = await eventually(check, within=90)
    return result


async def test_rolling_update_without_surge_keeps_two_slices_ready_and_never_mixes(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    before = await rolling_cluster(kubectl, "roll", {"maxUnavailable": 1, "maxSurge": 0})
    old_names = {p["metadata"]["name"] for p in before if is_worker(p)}
    async with sampling(world, "roll", 4) as samples:
        await patch_image(kubectl, "roll", NEW)
        workers = await finished(kubectl, "roll", before)
    assert min(samples.ready_slices) >= 2, samples.ready_slices
    assert not samples.mixed
    assert not old_names & {p["metadata"]["name"] for p in workers}
    indices = sorted({int(labels_of(p)["ray.io/worker-group-replica-index"]) for p in workers})
    assert indices == [0, 1, 2]
    assert all(p["spec"]["containers"][0]["image"] == NEW for p in workers)
    events = (await kubectl.json("get", "events", "--field-selector", "reason=TemplateChanged"))[
        "items"
    ]
    assert len(events) == 3, [e.get("note") or e.get("message") for e in events]


@pytest.mark.asyncio(loop_scope="function")  # a private world
async def test_rolling_update_with_surge_never_drops_below_three_ready_slices(
    world: World, tmp_path: Path
) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    op = await world.start_operator(resync_period=0.3)
    before = await rolling_cluster(kubectl, "surge", {"maxUnavailable": 0, "maxSurge": 1})
    async with sampling(world, "surge", 4) as samples:
        await patch_image(kubectl, "surge", NEW)
        await finished(kubectl, "surge", before)
    # With maxUnavailable 0 an old slice may go only once a surge slice is Ready: had one gone
    # first, the samples would show 2 ready. (The moment with 4 ready lasts one pass, less than
    # a sampling period on a loaded machine, so it is not asserted.)
    assert min(samples.ready_slices) >= 3, samples.ready_slices
    assert not samples.mixed

    # A finished rollout writes nothing, over several resyncs.
    async def quiet() -> None:
        writes = op.writes
        await world.reconciled("surge", passes=3)
        assert op.writes == writes

    await eventually(quiet, within=30)


async def test_recreate_replaces_everything_once_and_a_replicas_change_nothing(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    obj = raycluster("rec", [cpu_group("g", replicas=2, hosts=4)])
    obj["spec"]["upgradeStrategy"] = {"type": "Recreate"}
    await kubectl.apply(obj)
    before = {p["metadata"]["uid"] for p in await settled(kubectl, "rec", 2, 4)}

    async def recreated() -> list[Any]:
        pods = await settled(kubectl, "rec", 2, 4)
        assert not before & {p["metadata"]["uid"] for p in pods}
        return pods

    async with sampling(world, "rec", 4) as samples:
        await patch_image(kubectl, "rec", NEW)
        after = await eventually(recreated, within=60)
        await asyncio.sleep(1.0)
    # Once: the 9 pods, then 9 new ones, and no other pod ever existed.
    assert samples.uids == before | {p["metadata"]["uid"] for p in after}
    assert len(samples.uids) == 18
    await kubectl.patch_json(
        "raycluster",
        "rec",
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}],
    )
    grown = await settled(kubectl, "rec", 3, 4)
    assert {p["metadata"]["uid"] for p in after} <= {p["metadata"]["uid"] for p in grown}


async def test_none_recreates_nothing_and_scales_up_with_the_new_template(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster, tmp_path)
    await world.start_operator()
    await kubectl.apply(raycluster("keep", [cpu_group("g", replicas=2, hosts=4)]))
    before = await settled(kubectl, "keep", 2, 4)
    await patch_image(kubectl, "keep", NEW)
    await world.reconciled("keep")
    same = await settled(kubectl, "keep", 2, 4)
    assert {p["metadata"]["uid"] for p in same} == {p["metadata"]["uid"] for p in before}
    await kubectl.patch_json(
        "raycluster",
        "keep",
        [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}],
    )
    grown = [p for p in await settled(kubectl, "keep", 3, 4) if is_worker(p)]
    old = {p["metadata"]["uid"] for p in before}
    added = [p for p in grown if p["metadata"]["uid"] not in old]
    assert len(added) == 4
    assert {p["spec"]["containers"][0]["image"] for p in added} == {NEW}
    assert len({template(p) for p in added}) == 1
    assert not {template(p) for p in added} & {template(p) for p in before if is_worker(p)}


@pytest.mark.asyncio(loop_scope="function")  # a private world
async def test_an_operator_restart_mid_rollout_resumes_and_finishes(
    world: World, tmp_path: Path
) -> None:
    kubectl = Kubectl(world.cluster, tmp_path)
    op = await world.start_operator()
    before = await rolling_cluster(kubectl, "resume", {"maxUnavailable": 1})
    old = {template(p) for p in before if is_worker(p)}
    await patch_image(kubectl, "resume", NEW)

    async def one_slice_replaced() -> None:
        workers = [p for p in await kubectl.pods("resume") if is_worker(p)]
        assert any(template(p) not in old for p in workers)
        assert any(template(p) in old for p in workers)

    await eventually(one_slice_replaced, within=60)
    await op.stop()
    async with sampling(world, "resume", 4) as samples:
        await world.start_operator(identity="restarted-operator")
        await finished(kubectl, "resume", before)
    assert not samples.mixed
    assert min(samples.ready_slices) >= 2


@pytest.mark.asyncio(loop_scope="function")  # a private world
async def test_under_kuberays_crd_recreate_works_and_rolling_update_is_refused(
    tmp_path: Path,
) -> None:
    """docs/design.md §3.7: None and Recreate are KubeRay's and must work under its CRD;
    RollingUpdate is ours, so KubeRay's enum refuses it."""
    async with running_world(NODES, crd=kuberay_crd()) as world:
        kubectl = Kubectl(world.cluster, tmp_path)
        await world.start_operator()
        obj = raycluster("kr", [cpu_group("g", replicas=1, hosts=4)])
        obj["spec"]["upgradeStrategy"] = {"type": "RollingUpdate"}
        code, _, err = await run_kubectl(
            kubectl.binary,
            ["apply", "-f", "-"],
            env=kubectl.env,
            stdin=yaml.safe_dump(obj),
            ok=False,
        )
        assert code != 0 and "RollingUpdate" in err, err
        obj["spec"]["upgradeStrategy"] = {"type": "Recreate"}
        await kubectl.apply(obj)
        before = {p["metadata"]["uid"] for p in await settled(kubectl, "kr", 1, 4)}
        await patch_image(kubectl, "kr", NEW)

        async def recreated() -> None:
            pods = await settled(kubectl, "kr", 1, 4)
            assert not before & {p["metadata"]["uid"] for p in pods}

        await eventually(recreated, within=60)
