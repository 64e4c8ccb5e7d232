"""The Serve application of examples/rayservice-tpu-v5p-2x2x2-local.yaml.

One replica per host of the TPU slice: each reserves its host's 4 chips (Ray's ``TPU``
resource, which the operator gives every TPU host), so the two replicas land on the slice's
two hosts and each host runs a Serve proxy. That matters on Kubernetes: a RayService worker is
Ready only while its proxy answers (KubeRay's serving readiness), and a slice serves only while
all its hosts are Ready. Each answer says which host of which slice served it, so a client sees
the slice behind the service.

``v1`` and ``v2`` are two versions of the same deployment's code (one deployment name): moving
``import_path`` from one to the other in serveConfigV2 is a code change that Serve rolls out in
place, replica by replica, on the same cluster.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from ray import serve

#: The deployment both versions share: its name is what makes the change a rolling update.
HOST_REPLICA: dict[str, Any] = {
    "name": "SliceHost",
    "num_replicas": 2,
    "ray_actor_options": {"num_cpus": 0, "resources": {"TPU": 4}},
}


def where() -> dict[str, str]:
    """The host this replica runs on, as the TPU runtime sees it, and its RayCluster (the
    operator's env): a NewCluster upgrade moves the answers to another cluster."""
    return {
        "cluster": os.environ.get("RAY_CLUSTER_NAME", ""),
        "slice": os.environ.get("TPU_NAME", ""),
        "worker": os.environ.get("TPU_WORKER_ID", ""),
        "host": socket.gethostname(),
    }


@serve.deployment(**HOST_REPLICA)
class SliceHostV1:
    async def __call__(self, request: Any) -> dict[str, str]:
        return {"version": "v1", **where()}


@serve.deployment(**HOST_REPLICA)
class SliceHostV2:
    def __init__(self) -> None:
        self.served = 0

    async def __call__(self, request: Any) -> dict[str, str]:
        self.served += 1
        return {"version": "v2", **where(), "served_by_this_replica": str(self.served)}


v1 = SliceHostV1.bind()
v2 = SliceHostV2.bind()
