"""GKE's host maintenance, simulated (devkube/addons/maintenance.py): the maintenance label is
only a label, unless the node opts in; then its kubelet stops at the announced time and the
node goes Unknown, as a VM that cannot live-migrate does."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube import DevCluster
from tests.harness import kubectl as kubectl_bin
from tests.harness.waiting import eventually

KUBELET = "dev.raycluster-operator.io/kubelet"


@pytest.fixture
async def cluster() -> AsyncIterator[DevCluster]:
    async with DevCluster(nodes=["cpu:2"], kubelet_delay=0.05, node_grace=2.0) as started:
        yield started


async def test_kubelet_stops_at_the_maintenance_time_only_when_opted_in(
    cluster: DevCluster, tmp_path: Any
) -> None:
    kubectl = kubectl_bin.runner(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    at = int(time.time()) + 3
    for node in ("cpu-0-n0", "cpu-0-n1"):
        labelled = await kubectl(
            "label", "node", node, f"cloud.google.com/scheduled-maintenance-time={at}"
        )
        assert labelled.returncode == 0, labelled.stderr
    tainted = await kubectl(
        "taint", "node", "cpu-0-n1", "cloud.google.com/impending-node-termination=:NoSchedule"
    )
    assert tainted.returncode == 0, tainted.stderr
    opted = await kubectl(
        "annotate", "node", "cpu-0-n0", "dev.raycluster-operator.io/maintenance=stop-kubelet"
    )
    assert opted.returncode == 0
    before = await cluster.client.get("/api/v1/nodes/cpu-0-n0")
    assert KUBELET not in before["metadata"]["annotations"]

    async def stopped() -> dict[str, Any]:
        node = await cluster.client.get("/api/v1/nodes/cpu-0-n0")
        assert node["metadata"]["annotations"].get(KUBELET) == "stopped"
        return node

    await eventually(stopped)
    assert time.time() >= at

    async def unknown() -> None:
        node = await cluster.client.get("/api/v1/nodes/cpu-0-n0")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "Unknown"

    await eventually(unknown)
    # The node that did not opt in keeps its kubelet: the label alone is only a label.
    other = await cluster.client.get("/api/v1/nodes/cpu-0-n1")
    assert KUBELET not in (other["metadata"].get("annotations") or {})
    ready = next(c for c in other["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
