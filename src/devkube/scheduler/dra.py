"""Dynamic Resource Allocation, as kube-scheduler's DynamicResources plugin decides it: a pure
function of ResourceSlices, DeviceClasses and ResourceClaims (docs/design.md §8, "DRA").

A pod's claims are the ones `pod.status.resourceClaimStatuses` names (generated from a
template by the resourceclaim controller) or `spec.resourceClaims[].resourceClaimName` names.
On a candidate node every unallocated claim is allocated by trying, request by request, the
devices published for that node (a slice's `nodeName`, `allNodes`, or a `nodeSelector` the
node matches) that are not allocated to any other claim and that every selector of the
request's DeviceClass and of the request itself accepts. An allocated claim pins its pods to
the nodes its `status.allocation.nodeSelector` selects.

Selectors are CEL in Kubernetes; `selector_matches` understands the forms device drivers'
classes use (conjunctions of equalities on `device.driver` and `device.attributes[...]`) and
rejects any other expression (the device does not match), which is what a class the dev
cluster cannot read should do: allocate nothing rather than anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkube.machinery.selectors import node_selector_term_matches

View = Mapping[str, Any]  # read only: what the checks read of an object

#: kube-scheduler's words (pkg/scheduler/framework/plugins/dynamicresources).
CANNOT_ALLOCATE = "cannot allocate all claims"
#: The annotation kube's resourceclaim controller puts on a claim it generated for a pod.


def waiting_for_claim(name: str) -> str:
    return f'waiting for dynamic resource controller to create the resourceclaim "{name}"'


def pod_claim_names(pod: View) -> tuple[list[str], str | None]:
    """The names of the ResourceClaims the pod uses, or the first it still waits for."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    generated = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in status.get("resourceClaimStatuses") or []
    }
    names: list[str] = []
    for entry in spec.get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            names.append(str(entry["resourceClaimName"]))
        elif entry.get("resourceClaimTemplateName"):
            name = generated.get(str(entry.get("name")))
            if not name:
                pod_name = str((pod.get("metadata") or {}).get("name", ""))
                return names, f"{pod_name}-{entry.get('name')}"
            names.append(str(name))
    return names, None


# --- selectors -------------------------------------------------------------------------

_TERM = re.compile(
    r"""\s*device\.(?:(?P<driver>driver)|attributes\[(?P<q>['"])(?P<domain>[^'"]+)(?P=q)\]"""
    r"""\.(?P<attr>[A-Za-z0-9_]+))\s*==\s*(?P<value>'[^']*'|"[^"]*"|-?\d+|true|false)\s*"""
)


def _literal(text: str) -> str | int | bool:
    if text[0] in "'\"":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def _attribute(device: View, driver: str, domain: str, name: str) -> object:
    attributes = device.get("attributes") or {}
    value = attributes.get(f"{domain}/{name}")
    if value is None and domain == driver:
        value = attributes.get(name)  # unqualified names are in the driver's domain
    if not isinstance(value, Mapping):
        return None
    for kind in ("string", "int", "bool", "version"):
        if kind in value:
            return value[kind]
    return None


def selector_matches(expression: str, driver: str, device: View) -> bool:
    """A CEL selector of the forms above, evaluated for one device of `driver`."""
    for part in expression.split("&&"):
        match = _TERM.fullmatch(part)
        if match is None:
            return False
        expected = _literal(match.group("value"))
        if match.group("driver"):
            actual: object = driver
        else:
            actual = _attribute(device, driver, match.group("domain"), match.group("attr"))
        if type(actual) is not type(expected) or actual != expected:
            return False
    return True


def _selectors_match(selectors: Iterable[View], driver: str, device: View) -> bool:
    return all(
        selector_matches(str((s.get("cel") or {}).get("expression", "")), driver, device)
        for s in selectors
    )


# --- the world of one pass -----------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    spec: View

    @property
    def key(self) -> tuple[str, str, str]:
        return self.driver, self.pool, self.name


@dataclass
class DraWorld:
    """Slices, classes and claims as one pass sees them; `allocate` records what it hands out,
    so two pods of the pass never get one device."""

    slices: Sequence[View]
    classes: Mapping[str, View]
    claims: dict[tuple[str, str], dict[str, Any]]
    in_use: set[tuple[str, str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        for claim in self.claims.values():
            for result in _results(claim):
                self.in_use.add((result["driver"], result["pool"], result["device"]))

    def devices_for(self, node: View) -> list[Device]:
        name = str((node.get("metadata") or {}).get("name", ""))
        labels = (node.get("metadata") or {}).get("labels") or {}
        found: list[Device] = []
        for slice_ in self.slices:
            spec = slice_.get("spec") or {}
            if spec.get("nodeName"):
                if spec["nodeName"] != name:
                    continue
            elif spec.get("nodeSelector"):
                terms = spec["nodeSelector"].get("nodeSelectorTerms") or []
                if not any(node_selector_term_matches(t, labels, name) for t in terms):
                    continue
            elif not spec.get("allNodes"):
                continue
            pool = str((spec.get("pool") or {}).get("name", ""))
            driver = str(spec.get("driver", ""))
            found += [
                Device(driver, pool, str(d.get("name")), d) for d in spec.get("devices") or []
            ]
        return found

    def claims_of(self, pod: View) -> tuple[list[dict[str, Any]], str | None]:
        """The pod's claims, or why the pod cannot be tried yet."""
        names, waiting = pod_claim_names(pod)
        if waiting is not None:
            return [], waiting_for_claim(waiting)
        namespace = str((pod.get("metadata") or {}).get("namespace", "default"))
        claims = []
        for name in names:
            claim = self.claims.get((namespace, name))
            if claim is None:
                return [], f'resourceclaim "{name}" not found'
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                return [], f'resourceclaim "{name}" is being deleted'
            claims.append(claim)
        return claims, None

    def allocate(self, claims: Sequence[View], node: View) -> dict[str, dict[str, Any]] | None:
        """The allocation of each unallocated claim on `node` (by claim name), or None when
        one cannot be allocated there (or an allocated one pins another node)."""
        name = str((node.get("metadata") or {}).get("name", ""))
        labels = (node.get("metadata") or {}).get("labels") or {}
        devices: list[Device] | None = None
        taken: set[tuple[str, str, str]] = set()
        answer: dict[str, dict[str, Any]] = {}
        for claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms")
                if terms and not any(node_selector_term_matches(t, labels, name) for t in terms):
                    return None
                continue
            if devices is None:
                devices = self.devices_for(node)
            result = self._allocate_claim(claim, devices, taken)
            if result is None:
                return None
            answer[str(claim["metadata"]["name"])] = _allocation(result, claim, self.classes, name)
        return answer

    def _allocate_claim(
        self, claim: View, devices: Sequence[Device], taken: set[tuple[str, str, str]]
    ) -> list[tuple[str, Device]] | None:
        chosen: list[tuple[str, Device]] = []
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            exact = request.get("exactly") or {}
            klass = self.classes.get(str(exact.get("deviceClassName", "")))
            if klass is None:
                return None
            selectors = [*((klass.get("spec") or {}).get("selectors") or [])]
            selectors += exact.get("selectors") or []
            fitting = [
                d
                for d in devices
                if d.key not in self.in_use
                and d.key not in taken
                and _selectors_match(selectors, d.driver, d.spec)
            ]
            want = len(fitting) if exact.get("allocationMode") == "All" else exact.get("count", 1)
            if not fitting or len(fitting) < int(want):
                return None
            for device in fitting[: int(want)]:
                taken.add(device.key)
                chosen.append((str(request.get("name", "")), device))
        return chosen

    def commit(self, claim_name: tuple[str, str], allocation: Mapping[str, Any]) -> None:
        """Count an allocation written this pass as in use."""
        for result in (allocation.get("devices") or {}).get("results") or []:
            self.in_use.add((result["driver"], result["pool"], result["device"]))
        claim = self.claims.get(claim_name)
        if claim is not None:
            self.claims[claim_name] = {
                **claim,
                "status": {**(claim.get("status") or {}), "allocation": dict(allocation)},
            }


def _results(claim: View) -> list[Mapping[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[Mapping[str, Any]] = (allocation.get("devices") or {}).get("results") or []
    return results


def _allocation(
    chosen: Sequence[tuple[str, Device]], claim: View, classes: Mapping[str, View], node: str
) -> dict[str, Any]:
    """`status.allocation`: the devices, the configuration from the classes (FromClass) then
    the claim (FromClaim), and a node selector pinning the claim's pods to `node`."""
    config: list[dict[str, Any]] = []
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    for request in requests:
        klass = classes.get(str((request.get("exactly") or {}).get("deviceClassName", ""))) or {}
        for entry in (klass.get("spec") or {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [request.get("name")], **entry})
    for entry in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        config.append({"source": "FromClaim", **entry})
    devices: dict[str, Any] = {
        "results": [
            {"request": request, "driver": d.driver, "pool": d.pool, "device": d.name}
            for request, d in chosen
        ]
    }
    if config:
        devices["config"] = config
    return {
        "devices": devices,
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
