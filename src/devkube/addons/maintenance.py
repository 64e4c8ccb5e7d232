"""GKE host maintenance, simulated: the VM goes away at the announced time (opt-in per node).

GKE announces a host maintenance on the Node with the label
`cloud.google.com/scheduled-maintenance-time` (a Unix time, in seconds); accelerator VMs cannot
live-migrate, so at that time the VM stops. Kubernetes itself does nothing with the label, and
neither does the dev cluster by default: labelling a node is just a label. A node that also
carries the annotation `dev.raycluster-operator.io/maintenance: stop-kubelet` has its kubelet
stopped (`dev.raycluster-operator.io/kubelet=stopped`, docs/design.md §8 Node lifecycle) once the
announced time has come, which is what a test needs to see the node go NotReady, then Unknown,
exactly when GKE's VM would stop. Removing the kubelet annotation afterwards brings it back.

Not Kubernetes (a cloud provider's behaviour), hence an add-on; `DevCluster` wires it in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from devkube.kubelet.agent import KUBELET_ANNOTATION, STOPPED
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.index import Index
from devkube.machinery.informer import Informer

log = logging.getLogger(__name__)

MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
OPT_IN_ANNOTATION = "dev.raycluster-operator.io/maintenance"
STOP_KUBELET = "stop-kubelet"


def _opted_in(node: Mapping[str, Any]) -> bool:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(OPT_IN_ANNOTATION) == STOP_KUBELET


def due(node: Mapping[str, Any], now: float) -> bool:
    """The node opted in, its maintenance time has come and its kubelet still runs."""
    meta = node.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(OPT_IN_ANNOTATION) != STOP_KUBELET:
        return False
    if annotations.get(KUBELET_ANNOTATION) == STOPPED:
        return False
    try:
        at = float((meta.get("labels") or {})[MAINTENANCE_LABEL])
    except (KeyError, ValueError):
        return False
    return now >= at


class HostMaintenance:
    def __init__(
        self,
        client: ApiClient,
        *,
        nodes: Informer,
        every: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.nodes = nodes
        self._clock = clock
        self._loop = ControlLoop(
            "devcluster host maintenance", self.run, period=every, failure="maintenance failed"
        )
        # Only the nodes that opted in are looked at (4 times a second, at 8,000 nodes).
        self._opted = Index(nodes, lambda n: ("opted",) if _opted_in(n) else ())
        nodes.subscribe(self._loop.changed)

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def run(self) -> None:
        now = self._clock()
        for node in list(self._opted.bucket("opted").values()):
            if not due(node, now):
                continue
            name = str((node.get("metadata") or {}).get("name"))
            log.info("host maintenance: the VM of node %s stops now (its kubelet stops)", name)
            patch = {"metadata": {"annotations": {KUBELET_ANNOTATION: STOPPED}}}
            try:
                await self._client.patch(resource_path("v1", "nodes", name=name), patch)
            except ApiError as error:
                log.warning("host maintenance: node %s: %s", name, error)
