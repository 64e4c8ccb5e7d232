"""The kubelet's side of Dynamic Resource Allocation: before a pod with resource claims starts,
each allocated device is *prepared* by the kubelet plugin of its driver, which answers what
the containers must see (CDI's container edits: device nodes and environment). As in kubelet,
a pod whose claims cannot be prepared yet does not start (it stays ContainerCreating, with a
`FailedPrepareDynamicResources` Warning) and is tried again.

A plugin is registered in-process (`Kubelet.plugins`, by driver name), standing for the gRPC
NodePrepareResources call a real kubelet makes on a plugin's socket; vendors' simulated
plugins live in `devkube/addons/`, never imported here. A claim of a driver with no plugin is
prepared as nothing (the simulated runtime needs nothing; a real kubelet would refuse).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ContainerEdits:
    """What one prepared device adds to a container: device node paths (created in the pod's
    mount namespace by a runtime that has one) and environment variables."""

    device_nodes: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def merged(self, other: ContainerEdits) -> ContainerEdits:
        nodes = self.device_nodes + tuple(
            n for n in other.device_nodes if n not in self.device_nodes
        )
        return ContainerEdits(nodes, {**self.env, **other.env})


class PrepareError(Exception):
    """The device cannot be prepared now (the pod waits and is tried again)."""


class KubeletPlugin(Protocol):
    """A DRA driver's node plugin."""

    driver: str

    async def prepare(
        self, claim: Mapping[str, Any], result: Mapping[str, Any], node: str
    ) -> ContainerEdits:
        """Prepare one allocated device (`result`: one `status.allocation.devices.results`
        entry of `claim`) on `node`; raise PrepareError when it cannot be done yet."""
        ...


def claims_by_entry(pod: Mapping[str, Any]) -> dict[str, str]:
    """The pod's claim entries (`spec.resourceClaims[].name`) to the ResourceClaim names."""
    status = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    found: dict[str, str] = {}
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = str(entry.get("name"))
        claim = entry.get("resourceClaimName") or status.get(name)
        if claim:
            found[name] = str(claim)
    return found


def container_entries(pod: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each container's claim entries (`resources.claims[].name`)."""
    containers: Sequence[Mapping[str, Any]] = (pod.get("spec") or {}).get("containers") or []
    return {
        str(c.get("name")): [
            str(r.get("name")) for r in (c.get("resources") or {}).get("claims") or []
        ]
        for c in containers
    }


async def prepare_pod(
    get: Any, plugins: Mapping[str, KubeletPlugin], pod: Mapping[str, Any], node: str
) -> dict[str, ContainerEdits]:
    """Each container's edits from the devices of the claims it names (`get(path)` reads a
    claim). Raises PrepareError while a claim is missing, unallocated or not reserved for the
    pod, or a plugin cannot prepare yet."""
    meta = pod.get("metadata") or {}
    namespace, uid = str(meta.get("namespace", "default")), str(meta.get("uid", ""))
    per_entry: dict[str, ContainerEdits] = {}
    for entry, claim_name in claims_by_entry(pod).items():
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{claim_name}"
        try:
            claim = await get(path)
        except Exception as error:  # any failure to read the claim means "not yet"
            raise PrepareError(f'resourceclaim "{claim_name}": {error}') from error
        status = claim.get("status") or {}
        if not any(r.get("uid") == uid for r in status.get("reservedFor") or []):
            raise PrepareError(f'resourceclaim "{claim_name}" is not reserved for the pod')
        edits = ContainerEdits()
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for result in results:
            plugin = plugins.get(str(result.get("driver")))
            if plugin is not None:
                edits = edits.merged(await plugin.prepare(claim, result, node))
        per_entry[entry] = edits
    if len(per_entry) < len((pod.get("spec") or {}).get("resourceClaims") or []):
        raise PrepareError("waiting for the pod's resource claims to be created")
    answer: dict[str, ContainerEdits] = {}
    for container, entries in container_entries(pod).items():
        edits = ContainerEdits()
        for entry in entries:
            edits = edits.merged(per_entry.get(entry, ContainerEdits()))
        answer[container] = edits
    return answer
