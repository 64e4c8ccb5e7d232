from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devkube.server import ApiServer
from raycluster_operator.kube import KubeClient

#: Enough of a RayCluster CRD for the adapter's tests: any fields, a status subresource.
RAYCLUSTER_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "rayclusters.ray.io"},
    "spec": {
        "group": "ray.io",
        "scope": "Namespaced",
        "names": {
            "plural": "rayclusters",
            "singular": "raycluster",
            "kind": "RayCluster",
            "listKind": "RayClusterList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


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
