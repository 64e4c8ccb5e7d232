"""Kueue beside a dev cluster on Kubernetes' own control plane (devkube.addons.kueue): started
once the ray.io CRDs are served, stopped before the cluster. Where it cannot run (no Go, no
root for its private mount namespace) a test skips, and fails under CI=true."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from devkube import DevCluster, Kueue, kueue_available
from tests.harness import control_planes
from tests.harness.objects import Obj

KUEUE = "kueue.x-k8s.io/v1beta2"


def require_kueue() -> None:
    control_planes.require(control_planes.KUBERNETES)
    ok, why = kueue_available()
    if not ok:
        if control_planes.in_ci():
            pytest.fail(why)
        pytest.skip(why)


@contextlib.asynccontextmanager
async def running_kueue(cluster: DevCluster) -> AsyncIterator[Kueue]:
    kueue = Kueue()
    try:
        await kueue.start(cluster)
        yield kueue
    finally:
        await kueue.stop()


def flavor(name: str) -> Obj:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}


def queue(
    local: str, cluster: str, *, namespace: str, chips: int, preempting: bool = False
) -> list[Obj]:
    """A ClusterQueue CLUSTER of CHIPS TPU chips on flavor v5p (CPU and memory for the heads
    too) and its LocalQueue LOCAL in NAMESPACE; ``preempting``: lower priorities yield."""
    quota = [
        {"name": "cpu", "nominalQuota": "16"},
        {"name": "memory", "nominalQuota": "64Gi"},
        {"name": "google.com/tpu", "nominalQuota": str(chips)},
    ]
    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [q["name"] for q in quota],
                "flavors": [{"name": "v5p", "resources": quota}],
            }
        ],
    }
    if preempting:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    return [
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cluster}, "spec": spec},
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": local, "namespace": namespace},
            "spec": {"clusterQueue": cluster},
        },
    ]
