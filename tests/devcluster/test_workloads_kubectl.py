"""Deployments and ReplicaSets in the dev cluster, driven by the real kubectl as on a real
cluster: apply, rollout status, scale, set image (RollingUpdate and Recreate), get, delete."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from devkube import DevCluster

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: main, image: "nginx:1.27", command: [sleep, infinity]}
"""

#: One cluster for the module's tests, each in a namespace of its own, where its kubectl points
#: (docs/design.md §8.1): they all name their Deployment `web`, and list every ReplicaSet and
#: pod of their namespace.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def dev_cluster(module_cluster: DevCluster) -> DevCluster:
    return module_cluster


@pytest_asyncio.fixture(loop_scope="module")
async def ns(dev_cluster: DevCluster, request: pytest.FixtureRequest) -> str:
    """A namespace named for the test."""
    name = request.node.name.removeprefix("test_").replace("_", "-")[:63].strip("-")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    await dev_cluster.client.create("/api/v1/namespaces", namespace)
    return name


@pytest.fixture
def kubeconfig_path(dev_cluster: DevCluster, ns: str, tmp_path: Path) -> Path:
    config = dev_cluster.kubeconfig_dict(namespace=ns)
    return dev_cluster.write_kubeconfig(tmp_path / "kubeconfig", config)


def rs_path(ns: str) -> str:
    return f"/apis/apps/v1/namespaces/{ns}/replicasets"


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


async def items(cluster: DevCluster, path: str) -> list[dict[str, Any]]:
    listed = await cluster.client.list(path)
    return list(listed.get("items") or [])


def active(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


@contextlib.asynccontextmanager
async def sampling(
    cluster: DevCluster,
    ns: str,
    check: Callable[[list[dict[str, Any]], list[dict[str, Any]]], None],
) -> AsyncIterator[list[int]]:
    """Run `check(replicasets, pods)` on snapshots until the block ends; count samples."""
    samples = [0]
    failures: list[BaseException] = []

    async def loop() -> None:
        while True:
            sets, pods = await items(cluster, rs_path(ns)), await items(cluster, pods_path(ns))
            try:
                check(sets, pods)
            except AssertionError as error:
                failures.append(error)
                return
            samples[0] += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(loop())
    try:
        yield samples
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if failures:
        raise failures[0]


async def test_apply_rollout_status_get_and_ownership(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    assert (await kubectl("apply", "-f", "-", input=DEPLOYMENT)).returncode == 0
    done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    assert done.returncode == 0, done.stderr
    assert 'deployment "web" successfully rolled out' in done.stdout

    shown = (await kubectl("get", "deploy")).stdout.splitlines()
    assert shown[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert shown[1].split()[:4] == ["web", "3/3", "3", "3"]
    wide = (await kubectl("get", "deploy", "-o", "wide")).stdout.splitlines()
    assert wide[0].split()[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert wide[1].split()[5:] == ["main", "nginx:1.27", "app=web"]

    shown_yaml = yaml.safe_load((await kubectl("get", "deploy", "web", "-o", "yaml")).stdout)
    defaulted = shown_yaml["spec"]
    assert (defaulted["progressDeadlineSeconds"], defaulted["revisionHistoryLimit"]) == (600, 10)
    assert "collisionCount" not in shown_yaml["status"]  # no collision, no count
    deployment = json.loads((await kubectl("get", "deploy", "web", "-o", "json")).stdout)
    status = deployment["status"]
    assert status["observedGeneration"] == deployment["metadata"]["generation"]
    assert {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]} == {
        "Available": ("True", "MinimumReplicasAvailable"),
        "Progressing": ("True", "NewReplicaSetAvailable"),
    }
    sets = json.loads((await kubectl("get", "rs", "-o", "json")).stdout)["items"]
    assert len(sets) == 1
    rs = sets[0]
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": pod_hash}
    (owner,) = rs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Deployment",
        deployment["metadata"]["uid"],
        True,
    )
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    rs_table = (await kubectl("get", "rs")).stdout.splitlines()
    assert rs_table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
    assert rs_table[1].split()[:4] == [f"web-{pod_hash}", "3", "3", "3"]

    pods = json.loads((await kubectl("get", "pods", "-l", "app=web", "-o", "json")).stdout)
    assert len(pods["items"]) == 3
    for pod in pods["items"]:
        assert pod["metadata"]["name"].startswith(f"web-{pod_hash}-")
        assert pod["metadata"]["labels"]["pod-template-hash"] == pod_hash
        (ref,) = pod["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"]) == ("ReplicaSet", rs["metadata"]["uid"])

    # A deleted pod is replaced by the ReplicaSet.
    gone = pods["items"][0]["metadata"]["name"]
    assert (await kubectl("delete", "pod", gone, "--wait=true")).returncode == 0
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0
    names = (await kubectl("get", "pods", "-l", "app=web", "-o", "name")).stdout.split()
    assert len(names) == 3 and f"pod/{gone}" not in names

    # Deleting the Deployment cascades through the ReplicaSet to the pods.
    assert (await kubectl("delete", "deploy", "web", "--wait=true")).returncode == 0

    async def all_gone() -> None:
        assert await items(dev_cluster, rs_path(ns)) == []
        assert await items(dev_cluster, pods_path(ns)) == []

    from tests.harness.waiting import eventually

    await eventually(all_gone)


async def test_scale_up_and_down_with_kubectl_scale(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    from tests.harness.waiting import eventually

    await kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0
    scaled = await kubectl("scale", "deploy/web", "--replicas=5")
    assert scaled.returncode == 0 and "scaled" in scaled.stdout, scaled.stderr
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0

    async def count(n: int) -> None:
        assert len(active(await items(dev_cluster, pods_path(ns)))) == n
        table = (await kubectl("get", "deploy", "web", "--no-headers")).stdout.split()
        assert table[1:4] == [f"{n}/{n}", str(n), str(n)]

    await eventually(lambda: count(5))
    assert len(await items(dev_cluster, rs_path(ns))) == 1  # scaling is not a rollout
    await kubectl("scale", "deploy/web", "--replicas=1")
    await eventually(lambda: count(1))
    scale = json.loads(
        (
            await kubectl("get", "--raw", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale")
        ).stdout
    )
    assert scale["spec"]["replicas"] == 1 and scale["status"]["replicas"] == 1
    # status.selector is the label selector string an autoscaler lists pods with.
    assert scale["status"]["selector"] == "app=web"
    (rs,) = await items(dev_cluster, rs_path(ns))
    rs_scale = json.loads(
        (await kubectl("get", "--raw", f"{rs_path(ns)}/{rs['metadata']['name']}/scale")).stdout
    )
    pod_hash = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs_scale["status"]["selector"] == f"app=web,pod-template-hash={pod_hash}"


async def test_scale_status_selector_prints_set_based_requirements_sorted_by_key(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    manifest = yaml.safe_load(DEPLOYMENT)
    selector = {
        "matchLabels": {"tier": "front", "app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
            {"key": "zz", "operator": "DoesNotExist"},
            {"key": "canary", "operator": "Exists"},
        ],
    }
    manifest["spec"]["selector"] = selector
    manifest["spec"]["template"]["metadata"]["labels"] = {
        "app": "web",
        "tier": "front",
        "env": "dev",
        "canary": "yes",
    }
    applied = await kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    assert applied.returncode == 0, applied.stderr
    scale = json.loads(
        (
            await kubectl("get", "--raw", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale")
        ).stdout
    )
    assert scale["status"]["selector"] == "app=web,canary,env in (dev,prod),tier=front,!zz"


async def test_rolling_update_keeps_within_surge_and_unavailability(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    await kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0
    first = (await items(dev_cluster, rs_path(ns)))[0]["metadata"]["name"]

    def within_limits(sets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        # maxSurge 1: never more than 4 pods wanted; maxUnavailable 0: never fewer than 3.
        wanted = sum(int(rs["spec"].get("replicas", 0)) for rs in sets)
        assert wanted <= 4, f"{wanted} pods wanted by {len(sets)} replica sets"
        available = sum(int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in sets)
        assert available >= 3 or not sets, f"only {available} available"

    async with sampling(dev_cluster, ns, within_limits) as samples:
        await kubectl("set", "image", "deploy/web", "main=nginx:1.28")
        done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
        assert done.returncode == 0, done.stderr
    assert samples[0] > 5

    sets = {rs["metadata"]["name"]: rs for rs in await items(dev_cluster, rs_path(ns))}
    assert len(sets) == 2 and sets[first]["spec"]["replicas"] == 0
    (new,) = (rs for name, rs in sets.items() if name != first)
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    images = {
        p["spec"]["containers"][0]["image"] for p in active(await items(dev_cluster, pods_path(ns)))
    }
    assert images == {"nginx:1.28"}

    # Rolling back reuses the first ReplicaSet, as the newest revision.
    assert (await kubectl("rollout", "undo", "deploy/web")).returncode == 0
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0
    again = {rs["metadata"]["name"]: rs for rs in await items(dev_cluster, rs_path(ns))}
    assert again[first]["spec"]["replicas"] == 3
    assert again[first]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"


async def test_recreate_never_runs_old_and_new_pods_together(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    manifest = yaml.safe_load(DEPLOYMENT)
    manifest["spec"]["strategy"] = {"type": "Recreate"}
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    assert (await kubectl("rollout", "status", "deploy/web", "--timeout=60s")).returncode == 0

    def one_template(_sets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        images = {p["spec"]["containers"][0]["image"] for p in pods}  # terminating ones too
        assert len(images) <= 1, f"old and new pods together: {images}"

    async with sampling(dev_cluster, ns, one_template):
        await kubectl("set", "image", "deploy/web", "main=nginx:1.28")
        done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
        assert done.returncode == 0, done.stderr
    pods = active(await items(dev_cluster, pods_path(ns)))
    assert len(pods) == 3 and {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:1.28"}


async def test_a_replicaset_adopts_a_matching_orphan_and_scales(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    from tests.harness.waiting import eventually

    orphan = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "stray", "labels": {"app": "cache"}},
        "spec": {"containers": [{"name": "main", "image": "redis"}]},
    }
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "cache"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "cache"}},
            "template": {
                "metadata": {"labels": {"app": "cache"}},
                "spec": {"containers": [{"name": "main", "image": "redis"}]},
            },
        },
    }
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(orphan))
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(replicaset))

    async def owned(n: int) -> list[dict[str, Any]]:
        pods = active(await items(dev_cluster, pods_path(ns)))
        assert len(pods) == n
        assert all(p["metadata"]["ownerReferences"][0]["name"] == "cache" for p in pods)
        return pods

    pods = await eventually(lambda: owned(2))
    assert "stray" in {p["metadata"]["name"] for p in pods}  # adopted, not replaced
    await kubectl("scale", "rs/cache", "--replicas=0")
    await eventually(lambda: owned(0))
    table = (await kubectl("get", "rs", "cache", "--no-headers")).stdout.split()
    assert table[1:4] == ["0", "0", "0"]


async def test_get_lease_shows_its_holder(dev_cluster: DevCluster, kubectl: Any, ns: str) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15},
    }
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(lease))
    shown = (await kubectl("get", "lease", "leader")).stdout.splitlines()
    assert shown[0].split() == ["NAME", "HOLDER", "AGE"]
    assert shown[1].split()[:2] == ["leader", "pod-a"]


async def test_a_rollout_that_cannot_progress_exceeds_its_deadline(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    from tests.harness.waiting import eventually

    manifest = yaml.safe_load(DEPLOYMENT)
    manifest["spec"]["progressDeadlineSeconds"] = 2
    # No node has this label: the pods stay Pending, the rollout makes no progress.
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"example.com/nowhere": "x"}
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    assert done.returncode != 0
    assert 'deployment "web" exceeded its progress deadline' in done.stderr

    shown = yaml.safe_load((await kubectl("get", "deploy", "web", "-o", "yaml")).stdout)
    assert shown["spec"]["progressDeadlineSeconds"] == 2
    progressing = next(c for c in shown["status"]["conditions"] if c["type"] == "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert progressing["message"].endswith("has timed out progressing.")

    # Fixed, it progresses again and completes (with a deadline a loaded machine can meet:
    # 2 s between two pods' progress is a race on 2 cores running the whole suite).
    del manifest["spec"]["template"]["spec"]["nodeSelector"]
    manifest["spec"]["progressDeadlineSeconds"] = 120
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    assert done.returncode == 0, done.stderr

    async def completed() -> None:
        got = json.loads((await kubectl("get", "deploy", "web", "-o", "json")).stdout)
        cond = next(c for c in got["status"]["conditions"] if c["type"] == "Progressing")
        assert (cond["status"], cond["reason"]) == ("True", "NewReplicaSetAvailable")

    await eventually(completed)


async def test_a_replicaset_name_taken_by_another_bumps_the_collision_count(
    dev_cluster: DevCluster, kubectl: Any, ns: str
) -> None:
    from devkube.controllers.workloads import template_hash

    manifest = yaml.safe_load(DEPLOYMENT)
    manifest["spec"]["paused"] = True  # no ReplicaSet yet: first take its name
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
    stored = json.loads((await kubectl("get", "deploy", "web", "-o", "json")).stdout)
    taken = f"web-{template_hash(stored['spec']['template'])}"
    squatter = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": taken},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "other"}},
            "template": {
                "metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "main", "image": "redis"}]},
            },
        },
    }
    await kubectl("apply", "-f", "-", input=yaml.safe_dump(squatter))
    assert (await kubectl("rollout", "resume", "deploy/web")).returncode == 0
    done = await kubectl("rollout", "status", "deploy/web", "--timeout=60s")
    assert done.returncode == 0, done.stderr

    shown = yaml.safe_load((await kubectl("get", "deploy", "web", "-o", "yaml")).stdout)
    assert shown["status"]["collisionCount"] == 1
    sets = {rs["metadata"]["name"]: rs for rs in await items(dev_cluster, rs_path(ns))}
    assert set(sets) == {taken, f"web-{template_hash(stored['spec']['template'], 1)}"}
    assert "ownerReferences" not in sets[taken]["metadata"]  # the squatter is left alone
