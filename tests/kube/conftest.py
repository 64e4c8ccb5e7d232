from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube.server import ApiServer
from raycluster_operator.kube import KubeClient
from tests.harness.manifests import crd

#: Enough of a RayCluster CRD for the adapter's tests: any fields, a status subresource.
RAYCLUSTER_CRD = crd("rayclusters", "RayCluster", group="ray.io", listKind="RayClusterList")


@pytest.fixture
async def api_server() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


@pytest.fixture
async def kube(api_server: ApiServer) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_kubeconfig(api_server.kubeconfig_dict())
    yield client
    await client.close()


@pytest.fixture
def raycluster_crd() -> dict[str, Any]:
    return RAYCLUSTER_CRD
