"""Ray's own KubeRay client (ray/autoscaler/_private/kuberay/node_provider.py) against the server.

Ray reads KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT_HTTPS and RAY_KUBERAY_CA_CERT_PATH
at import time (`url_from_resource` even binds the host as a default argument), so the client
runs in a child interpreter with that environment, exactly as in a pod; only the token path,
a module constant in Ray, is pointed at our token file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from devkube.server import ApiServer
from tests.harness.cluster import client_ssl_context, write_ca
from tests.harness.manifests import crd

pytest.importorskip("ray.autoscaler._private.kuberay.node_provider")

RAY_SCRIPT = r"""
import json, sys
import requests
from ray.autoscaler._private.kuberay import node_provider as np

np.IN_CLUSTER_TOKEN_PATH = sys.argv[1]
client = np.KubernetesHttpApiClient(namespace="default")
out = {}
cluster = client.get("rayclusters/rc")
out["cluster"] = cluster
out["pods"] = client.get("pods?labelSelector=" + requests.utils.quote("ray.io/cluster=rc"))
out["patched"] = client.patch(
    "rayclusters/rc",
    [np.worker_replica_patch("0", 3), np.worker_delete_patch("0", ["rc-worker-a"])],
)
try:
    client.patch(
        "rayclusters/rc",
        np.finalizer_patch("ray.io/x", [], cluster["metadata"]["resourceVersion"]),
    )
    out["stale_test_status"] = 200
except requests.HTTPError as exc:
    out["stale_test_status"] = exc.response.status_code
out["deleted"] = client.delete("pods/rc-worker-a")
print(json.dumps(out))
"""

CRD = crd("rayclusters", "RayCluster", group="ray.io")

CLUSTER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc"},
    "spec": {
        "headGroupSpec": {
            "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}
        },
        "workerGroupSpecs": [
            {
                "groupName": "g",
                "replicas": 1,
                "minReplicas": 0,
                "maxReplicas": 4,
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "ray"}]}},
            }
        ],
    },
}


def worker_pod(name: str, cluster: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"ray.io/cluster": cluster, "ray.io/group": "g"}},
        "spec": {"containers": [{"name": "ray-worker", "image": "ray"}]},
    }


async def seed(server: ApiServer) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        ssl = client_ssl_context(server)
        for path, body in [
            ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD),
            ("/apis/ray.io/v1/namespaces/default/rayclusters", CLUSTER),
            ("/api/v1/namespaces/default/pods", worker_pod("rc-worker-a", "rc")),
            ("/api/v1/namespaces/default/pods", worker_pod("rc-worker-b", "rc")),
            ("/api/v1/namespaces/default/pods", worker_pod("other-worker", "other")),
        ]:
            async with session.post(server.url + path, json=body, ssl=ssl) as resp:
                assert resp.status == 201, await resp.text()


async def test_ray_kuberay_client_reads_patches_and_deletes(
    server: ApiServer, tmp_path: Path
) -> None:
    await seed(server)
    token = tmp_path / "token"
    token.write_text(server.token)
    env = {
        **os.environ,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT_HTTPS": str(server.port),
        "RAY_KUBERAY_CA_CERT_PATH": str(write_ca(server, tmp_path / "ca.crt")),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RAY_SCRIPT,
        str(token),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])

    assert result["cluster"]["spec"]["workerGroupSpecs"][0]["groupName"] == "g"
    pods = result["pods"]
    assert pods["metadata"]["resourceVersion"]
    assert sorted(p["metadata"]["name"] for p in pods["items"]) == ["rc-worker-a", "rc-worker-b"]
    group = result["patched"]["spec"]["workerGroupSpecs"][0]
    # `replace` of the absent scaleStrategy succeeds, as on a real apiserver (json-patch v4)
    assert group["replicas"] == 3 and group["scaleStrategy"] == {"workersToDelete": ["rc-worker-a"]}
    assert result["patched"]["metadata"]["generation"] == 2
    # Ray guards its finalizer patch with a `test` of resourceVersion and expects 422 when stale
    assert result["stale_test_status"] == 422
    assert result["deleted"]["metadata"]["name"] == "rc-worker-a"  # pods answer with the object
    assert server.store.get("pods", "default", "rc-worker-a") is None
