"""A simulated NVIDIA DRA driver for ComputeDomains: its controller and its kubelet plugin in
one object, acting through the API like the real ones (README, "Simulated NVIDIA DRA driver").

Controller, on one ControlLoop over ComputeDomains, Nodes and ResourceClaims:
- publishes one ResourceSlice per IMEX-capable node (GB200, GB300: a clique label and that
  product), pool = the node, with the driver's devices `channel-0` and `daemon-0` (attributes
  `type`, `id`), as the real kubelet plugin publishes them;
- for each ComputeDomain: adds its finalizer, creates the ResourceClaimTemplate named by
  `spec.channel.resourceClaimTemplate.name` in its namespace (one `channel` request of class
  `compute-domain-default-channel.nvidia.com`, the opaque ComputeDomainChannelConfig with the
  domain's uid and allocation mode), reports `status.nodes` (the nodes labelled
  `resource.nvidia.com/computeDomain=<uid>`, each with its IP, clique and index) and
  `status.status` Ready once at least `numNodes` nodes are in and all Ready;
- takes the label off a node once no allocated claim of the domain is on it (the real
  plugin's unprepare), and on deletion removes the template, the labels, then its finalizer.

Kubelet plugin (`prepare`, kubelet/dra.py): refuses a node that serves another domain (the
real plugin's label conflict) or that is in another clique than the domain's nodes (the
simulation keeps a domain inside one NVLink clique; the real driver would split it into one
IMEX domain per clique), labels the node, and answers the channel's device node,
`/dev/nvidia-caps-imex-channels/channel0` (every channel with allocationMode All). The real
driver adds no environment to a workload's containers; neither does this one.
Not simulated: IMEX daemons and their DaemonSet, ComputeDomainCliques, DNS names.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from devkube.addons.nvidia.crd import (
    API_VERSION,
    CHANNEL_CLASS,
    DOMAIN_LABEL,
    DRIVER,
    FINALIZER,
    PLURAL,
    TARGET_LABEL,
    compute_domain_crd,
    device_classes,
)
from devkube.kubelet.dra import ContainerEdits, PrepareError
from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer

log = logging.getLogger(__name__)

CLIQUE_LABEL = "nvidia.com/gpu.clique"
PRODUCT_LABEL = "nvidia.com/gpu.product"
#: GPUs with IMEX (multi-node NVLink memory sharing).
IMEX_PRODUCTS = ("GB200", "GB300")
CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"
#: The driver's channel count per node (it will read it from the kernel; 2048 today).
MAX_CHANNELS = 2048


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj).get("labels") or {}
    return labels


def imex_capable(node: Mapping[str, Any]) -> bool:
    labels = _labels(node)
    product = labels.get(PRODUCT_LABEL, "").upper()
    return CLIQUE_LABEL in labels and any(p in product for p in IMEX_PRODUCTS)


def channel_config(claim: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ComputeDomainChannelConfig of a claim (from its allocation, else its spec)."""
    status = claim.get("status") or {}
    configs = ((status.get("allocation") or {}).get("devices") or {}).get("config")
    configs = configs or ((claim.get("spec") or {}).get("devices") or {}).get("config") or []
    for config in configs:
        opaque = config.get("opaque") or {}
        parameters = opaque.get("parameters") or {}
        if (
            opaque.get("driver") == DRIVER
            and parameters.get("kind") == "ComputeDomainChannelConfig"
        ):
            found: Mapping[str, Any] = parameters
            return found
    return None


def claim_template(domain: Mapping[str, Any]) -> dict[str, Any]:
    meta, spec = _meta(domain), domain.get("spec") or {}
    channel = spec.get("channel") or {}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": (channel.get("resourceClaimTemplate") or {}).get("name"),
            "namespace": meta.get("namespace"),
            "labels": {DOMAIN_LABEL: meta.get("uid"), TARGET_LABEL: "Workload"},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}
                    ],
                    "config": [
                        {
                            "requests": ["channel"],
                            "opaque": {
                                "driver": DRIVER,
                                "parameters": {
                                    "apiVersion": API_VERSION,
                                    "kind": "ComputeDomainChannelConfig",
                                    "domainID": meta.get("uid"),
                                    "allocationMode": channel.get("allocationMode") or "Single",
                                },
                            },
                        }
                    ],
                }
            }
        },
    }


def resource_slice(node: Mapping[str, Any]) -> dict[str, Any]:
    name = str(_meta(node).get("name"))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"{kind}-0",
                    "attributes": {"type": {"string": kind}, "id": {"int": 0}},
                }
                for kind in ("channel", "daemon")
            ],
        },
    }


def _node_ip(node: Mapping[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


def domain_status(
    domain: Mapping[str, Any], members: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """`status`: the member nodes (index = order within their clique) and Ready once
    `numNodes` are in, all Ready, as the driver's controller computes it."""
    nodes = []
    per_clique: dict[str, int] = {}
    for node in sorted(members, key=lambda n: str(_meta(n).get("name"))):
        clique = _labels(node).get(CLIQUE_LABEL, "")
        index = per_clique.get(clique, 0)
        per_clique[clique] = index + 1
        nodes.append(
            {
                "name": _meta(node).get("name"),
                "ipAddress": _node_ip(node),
                "cliqueID": clique,
                "index": index,
                "status": "Ready",
            }
        )
    wanted = int((domain.get("spec") or {}).get("numNodes") or 0)
    ready = len(nodes) >= wanted and all(n["status"] == "Ready" for n in nodes)
    status: dict[str, Any] = {"status": "Ready" if ready else "NotReady"}
    if nodes:
        status["nodes"] = nodes
    return status


class NvidiaDraDriver:
    """The add-on: `start(cluster)` installs the CRD and classes, starts the controller and
    registers the kubelet plugin; `stop()` ends them."""

    driver = DRIVER

    def __init__(self, every: float = 5.0) -> None:
        self._every = every
        self._client: ApiClient | None = None
        self._informers: list[Informer] = []
        self._loop = ControlLoop(
            "devcluster nvidia dra driver",
            self.sync,
            period=every,
            failure="nvidia dra driver pass failed",
        )
        self.passes = 0

    @property
    def client(self) -> ApiClient:
        assert self._client is not None, "the driver is not started"
        return self._client

    async def start(self, cluster: Any) -> None:
        """`cluster`: the DevCluster (its client, `install`, and the kubelet's plugins)."""
        self._client = cluster.client
        await cluster.install([compute_domain_crd(), *device_classes()])
        self.domains = Informer(self.client, f"/apis/{API_VERSION}/{PLURAL}")
        self.nodes = Informer(self.client, "/api/v1/nodes")
        self.claims = Informer(self.client, "/apis/resource.k8s.io/v1/resourceclaims")
        self.templates = Informer(self.client, "/apis/resource.k8s.io/v1/resourceclaimtemplates")
        self.slices = Informer(self.client, "/apis/resource.k8s.io/v1/resourceslices")
        self._informers = [self.domains, self.nodes, self.claims, self.templates, self.slices]
        for informer in self._informers:
            informer.subscribe(self._loop.changed)
            informer.start()
        await asyncio.gather(*(i.synced.wait() for i in self._informers))
        cluster.kubelet.plugins[DRIVER] = self
        await self.sync()  # the devices are published when the cluster is up
        self._loop.start()
        self._loop.poke()

    async def stop(self) -> None:
        await self._loop.stop()
        for informer in self._informers:
            await informer.stop()

    # --- controller ---------------------------------------------------------------------

    async def sync(self) -> None:
        self.passes += 1
        nodes = {name: n for (_, name), n in list(self.nodes.cache.items())}
        await self._publish_slices(nodes)
        domains = list(self.domains.cache.values())
        live = {str(_meta(d).get("uid")) for d in domains if not _meta(d).get("deletionTimestamp")}
        in_use = self._allocated_nodes(list(self.claims.cache.values()))
        stale = self._stale(nodes, live, in_use)
        if stale:
            # Confirmed from a fresh list: a node labelled by a prepare just now must not lose
            # its label because this watch has not shown the claim's allocation yet.
            listed = await self.client.list("/apis/resource.k8s.io/v1/resourceclaims")
            stale = self._stale(nodes, live, self._allocated_nodes(listed.get("items") or []))
        await asyncio.gather(*(self._label(name, None) for name in stale))
        await asyncio.gather(*(self._reconcile(d, nodes, set(stale)) for d in domains))

    @staticmethod
    def _stale(
        nodes: Mapping[str, Mapping[str, Any]], live: set[str], in_use: Mapping[str, set[str]]
    ) -> list[str]:
        """Nodes labelled for a domain that is gone or has no allocated claim on them."""
        return [
            name
            for name, node in nodes.items()
            if _labels(node).get(DOMAIN_LABEL)
            and (
                _labels(node)[DOMAIN_LABEL] not in live
                or name not in in_use.get(_labels(node)[DOMAIN_LABEL], set())
            )
        ]

    @staticmethod
    def _allocated_nodes(claims: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
        """Domain uid -> nodes with an allocated channel claim of it."""
        found: dict[str, set[str]] = {}
        for claim in claims:
            config = channel_config(claim)
            allocation = (claim.get("status") or {}).get("allocation") or {}
            if config is None or not allocation:
                continue
            for result in (allocation.get("devices") or {}).get("results") or []:
                if result.get("driver") == DRIVER:
                    found.setdefault(str(config.get("domainID")), set()).add(str(result["pool"]))
        return found

    async def _publish_slices(self, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        have = {
            str((s.get("spec") or {}).get("nodeName")): s
            for s in self.slices.cache.values()
            if (s.get("spec") or {}).get("driver") == DRIVER
        }
        path = "/apis/resource.k8s.io/v1/resourceslices"
        for name, node in nodes.items():
            if imex_capable(node) and name not in have:
                await self._quietly(self.client.create(path, resource_slice(node)))
        for name, slice_ in have.items():
            if name not in nodes:
                await self._quietly(self.client.delete(f"{path}/{_meta(slice_).get('name')}"))

    async def _reconcile(
        self,
        domain: Mapping[str, Any],
        nodes: Mapping[str, Mapping[str, Any]],
        unlabelled: set[str],
    ) -> None:
        meta = _meta(domain)
        namespace, name, uid = (
            str(meta.get("namespace")),
            str(meta.get("name")),
            str(meta.get("uid")),
        )
        path = resource_path(API_VERSION, PLURAL, namespace, name)
        template = claim_template(domain)
        template_name = str(template["metadata"]["name"])
        template_path = resource_path("resource.k8s.io/v1", "resourceclaimtemplates", namespace)
        existing = self.templates.cache.get((namespace, template_name))
        if meta.get("deletionTimestamp"):
            if existing is not None and _labels(existing).get(DOMAIN_LABEL) == uid:
                await self._quietly(self.client.delete(f"{template_path}/{template_name}"))
            finalizers = list(meta.get("finalizers") or [])
            if FINALIZER in finalizers:
                index = finalizers.index(FINALIZER)
                ops = [
                    {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
                    {"op": "remove", "path": f"/metadata/finalizers/{index}"},
                ]
                await self._quietly(self.client.patch(path, ops, kind="json"))
            return
        if FINALIZER not in (meta.get("finalizers") or []):
            finalizers = [*(meta.get("finalizers") or []), FINALIZER]
            version = meta.get("resourceVersion")
            body = {"metadata": {"finalizers": finalizers, "resourceVersion": version}}
            await self._quietly(self.client.patch(path, body))
        if existing is None:
            await self._quietly(self.client.create(template_path, template))
        members = [
            n
            for node_name, n in nodes.items()
            if _labels(n).get(DOMAIN_LABEL) == uid and node_name not in unlabelled
        ]
        status = domain_status(domain, members)
        if (domain.get("status") or {}) != status:
            body = {"status": {"nodes": None, **status}}
            await self._quietly(self.client.patch(f"{path}/status", body))

    async def _label(self, node: str, value: str | None) -> None:
        patch = {"metadata": {"labels": {DOMAIN_LABEL: value}}}
        await self._quietly(self.client.patch(resource_path("v1", "nodes", name=node), patch))

    async def _quietly(self, write: Any) -> None:
        try:
            await write
        except ApiError as error:
            if error.status not in (404, 409, 422):
                log.warning("nvidia dra driver: %s", error)
            elif error.status == 422:
                log.info("nvidia dra driver: %s", error)

    # --- kubelet plugin -----------------------------------------------------------------

    async def prepare(
        self, claim: Mapping[str, Any], result: Mapping[str, Any], node: str
    ) -> ContainerEdits:
        config = channel_config(claim)
        if config is None:
            raise PrepareError("no ComputeDomainChannelConfig in the claim")
        uid = str(config.get("domainID"))
        domain = next(
            (d for d in self.domains.cache.values() if str(_meta(d).get("uid")) == uid), None
        )
        if domain is None or _meta(domain).get("deletionTimestamp"):
            raise PrepareError(f"ComputeDomain {uid} not found")
        here = self.nodes.cache.get(("", node))
        if here is None:
            raise PrepareError(f"node {node} not found")
        serving = _labels(here).get(DOMAIN_LABEL)
        if serving and serving != uid:
            raise PrepareError(f"node {node} already serves ComputeDomain {serving}")
        clique = _labels(here).get(CLIQUE_LABEL, "")
        others = {
            _labels(n).get(CLIQUE_LABEL, "")
            for n in self.nodes.cache.values()
            if _labels(n).get(DOMAIN_LABEL) == uid
        }
        if others and clique not in others:
            raise PrepareError(
                f"node {node} is in clique {clique}; ComputeDomain {_meta(domain).get('name')} "
                f"is in clique {sorted(others)[0]}"
            )
        if serving != uid:
            await self._label(node, uid)
            self._loop.poke()
        count = MAX_CHANNELS if config.get("allocationMode") == "All" else 1
        return ContainerEdits(tuple(f"{CHANNEL_DIR}/channel{i}" for i in range(count)))
