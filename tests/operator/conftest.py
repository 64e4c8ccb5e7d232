"""Fixtures of the operator tests; the helpers live in operator_harness.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from operator_harness import NODES, World, stop_dev_cluster

from devkube import DevCluster
from raycluster_operator.api.crd import crd_manifest
from raycluster_operator.kube import KubeClient


@pytest.fixture
async def world() -> AsyncIterator[World]:
    cluster = DevCluster(nodes=NODES, kubelet_delay=0.05)
    await cluster.start()
    await cluster.apply(crd_manifest())
    kube = KubeClient.from_kubeconfig(cluster.kubeconfig_dict())
    w = World(cluster, kube)
    try:
        yield w
    finally:
        for op in w.operators:
            if not op.task.done():
                await op.stop()
        await kube.close()
        await stop_dev_cluster(cluster)
