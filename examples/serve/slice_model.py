"""The Serve application of examples/rayservice-slice-model-local.yaml: each replica serves
from a whole TPU slice.

A model too large for one host runs on every host of a slice at once. Each replica of
``SliceModel`` reserves a whole slice in its constructor with Ray's own slice API
(``ray.util.tpu.slice_placement_group``: the slice's head first, then one bundle per host
with the slice's label) and starts one ``Host`` actor in each bundle; a request runs on
every host of the replica's slice and the answer says which slice and hosts served it. The
reservation lives as long as the replica: Serve stopping the replica (a downscale) removes
it, and Ray removes it anyway when the replica's actor dies (a placement group shares its
creator's fate).

Scaling is Serve's (``autoscaling_config`` in serveConfigV2): a second replica asks Ray for a
second slice, Ray's autoscaler asks Kubernetes for it (the worker group's ``replicas``), the
operator creates both hosts together, and the replica starts once the slice is reserved.
When the load goes, Serve stops the newest replica, its slice is idle, and the autoscaler
removes it, whole.

The replica's own actor stays on the head (``node:__internal_head__``, as Ray Train pins its
state actor): it is a router to its hosts and holds no chip, so it never keeps a slice from
being idle, and the head's proxy, which Serve runs anyway, serves every replica. The slice's
hosts run no Serve proxy; the operator gives them the raylet's readiness and keeps them out
of the serve service (docs/design.md §12, RS4).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from ray.util.tpu import SlicePlacementGroup, slice_placement_group

import ray
from ray import serve

TOPOLOGY = "2x2x2"
ACCELERATOR = "v5p"


def where() -> dict[str, str]:
    """This host as the TPU runtime and the operator see it."""
    return {
        "cluster": os.environ.get("RAY_CLUSTER_NAME", ""),
        "slice": os.environ.get("TPU_NAME", ""),
        "worker": os.environ.get("TPU_WORKER_ID", ""),
        "host": socket.gethostname(),
    }


@ray.remote(num_cpus=0)
class Host:
    """One host's share of the model: holds the host's chips for the replica's life."""

    def where(self) -> dict[str, str]:
        return where()

    async def infer(self, hold: float) -> dict[str, str]:
        await asyncio.sleep(hold)  # the model's step, on this host's chips
        return where()


#: The replica's actor: on the head, holding nothing.
ON_HEAD = {"num_cpus": 0, "resources": {"node:__internal_head__": 0.001}}


@serve.deployment(ray_actor_options=ON_HEAD)
class SliceModel:
    async def __init__(self) -> None:
        # Blocks until a slice's head is reserved (Ray's autoscaler may have to make the
        # slice first): off the replica's event loop.
        self.slice: SlicePlacementGroup = await asyncio.to_thread(
            slice_placement_group, TOPOLOGY, ACCELERATOR, head_reservation_timeout_s=None
        )
        group = self.slice.placement_group
        await group.ready()
        chips = self.slice.bundle_resources.get("TPU", 0)
        self.hosts = [
            Host.options(
                resources={"TPU": chips},
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=index
                ),
            ).remote()
            for index in range(self.slice.num_hosts)
        ]
        self.placed = await asyncio.gather(*(h.where.remote() for h in self.hosts))

    async def __call__(self, request: Any) -> dict[str, Any]:
        hold = float(request.query_params.get("hold", "0"))
        answers = await asyncio.gather(*(h.infer.remote(hold) for h in self.hosts))
        return {
            "slice": answers[0]["slice"],
            "cluster": answers[0]["cluster"],
            "hosts": [a["host"] for a in answers],
            "workers": [a["worker"] for a in answers],
        }

    async def check_health(self) -> None:
        """A host of the slice is gone (its pod failed): Serve replaces this replica, and the
        new one reserves a whole slice again."""
        await asyncio.wait_for(asyncio.gather(*(h.where.remote() for h in self.hosts)), 10)

    def __del__(self) -> None:
        slice_group = getattr(self, "slice", None)
        if slice_group is not None:
            slice_group.shutdown()


app = SliceModel.bind()
