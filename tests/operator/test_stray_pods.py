"""Rule 2b on the user's path (docs/design.md §4): pods a user made by hand, or a Helm chart
made with its own ``app.kubernetes.io/created-by``, carry a RayCluster's ``ray.io/cluster``
label without a controller ownerReference to it. They are not a second controller (rule 2a
would freeze the cluster): the operator keeps running the cluster, neither counts nor deletes
them, and says so once, in the ``StrayPods`` condition and one Warning Event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.kubectl import KubectlEnv
from tests.harness.operator_world import SharedWorld, cpu_group, eventually, raycluster

# One cluster and operator for the module; a namespace per test.
pytestmark = pytest.mark.asyncio(loop_scope="module")

OURS = "raycluster-operator"


class Kubectl(KubectlEnv):
    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        _, out, _ = await self.run(*args, stdin=stdin)
        return str(out)


def stray(name: str, cluster: str, namespace: str, created_by: str | None) -> dict[str, Any]:
    """A worker-looking pod of ``cluster`` with no owner: as a user or a chart writes one."""
    pod_labels = {"ray.io/cluster": cluster, "ray.io/group": "w", "ray.io/node-type": "worker"}
    if created_by is not None:
        pod_labels["app.kubernetes.io/created-by"] = created_by
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
        "spec": {
            "containers": [
                {
                    "name": "tool",
                    "image": "rayproject/ray:2.60.0",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                }
            ]
        },
    }


def condition(cluster: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conditions = (cluster.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


async def warnings(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    out = await kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=StrayPods", "-o", "json"
    )
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


async def test_pods_with_the_label_but_no_controller_are_reported_and_never_freeze_the_cluster(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    world = shared_world
    kubectl = Kubectl(world.cluster.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)
    ns, name = "strays", "strays"
    await kubectl("create", "namespace", ns)
    obj = raycluster(name, [cpu_group("w", replicas=1)])
    obj["metadata"]["namespace"] = ns
    await kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))

    async def ours(count: int) -> list[dict[str, Any]]:
        pods = [
            p
            for p in await world.pods(name, ns)
            if p["metadata"]["labels"].get("app.kubernetes.io/created-by") == OURS
            and p["metadata"]["labels"]["ray.io/node-type"] == "worker"
        ]
        assert len(pods) == count
        return pods

    async def one_worker() -> None:
        await ours(1)

    await eventually(one_worker)
    helm = stray("strays-w-helm", name, ns, "helm")
    by_hand = stray("strays-w-by-hand", name, ns, None)
    manifests = yaml.safe_dump_all([helm, by_hand])
    await kubectl("apply", "-f", "-", stdin=manifests)

    async def reported() -> None:
        found = condition(await world.get_cluster(name, ns), "StrayPods")
        assert found is not None and found["status"] == "True"
        assert "strays-w-by-hand (app.kubernetes.io/created-by: none)" in found["message"]
        assert "strays-w-helm (app.kubernetes.io/created-by: helm)" in found["message"]
        # One Warning per list: the pods may be seen one by one (two lists), never more.
        said = await warnings(kubectl, ns)
        assert 1 <= len(said) <= 2
        assert any(found["message"] == w["message"] for w in said)

    await eventually(reported)
    told = len(await warnings(kubectl, ns))
    # Not frozen: no conflict, and a spec change is carried out beside the strays.
    assert condition(await world.get_cluster(name, ns), "ControllerConflict") is None
    patch = json.dumps({"spec": {"workerGroupSpecs": [cpu_group("w", replicas=2)]}})
    await kubectl("patch", "raycluster", name, "-n", ns, "--type", "merge", "-p", patch)

    async def scaled() -> None:
        await ours(2)
        status = (await world.get_cluster(name, ns)).get("status") or {}
        assert status.get("readyWorkerReplicas") == 2  # the strays are not counted

    await eventually(scaled)
    await world.reconciled(name, ns, passes=3)
    names = {p["metadata"]["name"] for p in await world.pods(name, ns)}
    assert {"strays-w-helm", "strays-w-by-hand"} <= names  # never deleted
    await ours(2)
    said = await warnings(kubectl, ns)
    assert len(said) == told  # steady state: no Warning more
    assert all(w["type"] == "Warning" and w["involvedObject"]["name"] == name for w in said)

    await kubectl("delete", "pod", "-n", ns, "strays-w-helm", "strays-w-by-hand", "--wait=false")

    async def cleared() -> None:
        found = condition(await world.get_cluster(name, ns), "StrayPods")
        assert found is not None
        assert (found["status"], found["reason"]) == ("False", "NoStrayPods")

    await eventually(cleared)
    assert len(await warnings(kubectl, ns)) == told  # clearing warns no more
