"""A stopped kubelet on the process runtime: a partitioned node whose processes keep running
until their pod is finished (the kubelet back) or removed from the API (force-deleted)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from devkube import DevCluster
from tests.harness.cluster import running_cluster

# The shared fixtures' types (tests/conftest.py), named here: conftest is not importable by name
# when several test directories run together.
Kubectl = Callable[..., Awaitable[Any]]
Eventually = Callable[..., Awaitable[Any]]

pytestmark = pytest.mark.process_runtime

PODS = "/api/v1/namespaces/default/pods"
NODE = "cpu-0-n0"
KUBELET = "dev.raycluster-operator.io/kubelet"


@pytest.fixture
async def dev_cluster() -> AsyncIterator[DevCluster]:
    async with running_cluster(runtime="process", nodes=["cpu:2"], node_grace=2.0) as cluster:
        yield cluster


def sleeper(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "containers": [
                {
                    "name": "main",
                    "image": "python",
                    "command": [sys.executable, "-c", "import time; time.sleep(600)"],
                }
            ],
        },
    }


async def test_processes_outlive_a_stopped_kubelet_until_their_pod_is_finished(
    dev_cluster: DevCluster, kubectl: Kubectl, eventually: Eventually
) -> None:
    cluster = dev_cluster
    for name in ("graceful", "forced"):
        await cluster.client.create(PODS, sleeper(name))

    async def running(name: str) -> None:
        pod = await cluster.client.get(f"{PODS}/{name}")
        assert pod["status"].get("phase") == "Running"

    for name in ("graceful", "forced"):
        await eventually(lambda name=name: running(name))
    runtime: Any = cluster.kubelet.runtime
    graceful, forced = runtime.find("default", "graceful"), runtime.find("default", "forced")
    assert graceful.sandbox.pids() and forced.sandbox.pids()

    assert (await kubectl("annotate", "node", NODE, f"{KUBELET}=stopped")).returncode == 0

    async def unknown() -> None:
        node = await cluster.client.get(f"/api/v1/nodes/{NODE}")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "Unknown"

    await eventually(unknown)
    # Partitioned: the processes run on; a graceful delete waits for the kubelet.
    deleted = await kubectl("delete", "pod", "graceful", "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    pod = await cluster.client.get(f"{PODS}/graceful")
    assert pod["metadata"]["deletionTimestamp"]
    assert graceful.sandbox.pids() and forced.sandbox.pids()
    # Force-deleted, the pod leaves the API and the dev cluster stops its processes at once.
    forced_out = await kubectl("delete", "pod", "forced", "--force", "--grace-period=0")
    assert forced_out.returncode == 0, forced_out.stderr

    async def forced_gone() -> None:
        assert forced.sandbox.pids() == []

    await eventually(forced_gone)
    assert graceful.sandbox.pids()
    # The kubelet back finishes the graceful deletion.
    assert (
        await kubectl("annotate", "node", NODE, f"{KUBELET}=running", "--overwrite")
    ).returncode == 0

    async def graceful_gone() -> None:
        names = [p["metadata"]["name"] for p in (await cluster.client.list(PODS))["items"]]
        assert names == []
        assert graceful.sandbox.pids() == []

    await eventually(graceful_gone)
