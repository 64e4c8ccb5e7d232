"""The kinds the operator reads and writes, and where they live in the REST API.

Objects stay plain JSON dicts everywhere; a kind is only the address of its collection.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None) -> str:
        """``namespace=None`` addresses the collection across all namespaces."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str = "") -> str:
        path = f"{self.collection_path(namespace)}/{name}"
        return f"{path}/{subresource}" if subresource else path


RAYCLUSTERS = Kind("ray.io", "v1", "RayCluster", "rayclusters")
RAYJOBS = Kind("ray.io", "v1", "RayJob", "rayjobs")
RAYSERVICES = Kind("ray.io", "v1", "RayService", "rayservices")
BATCH_JOBS = Kind("batch", "v1", "Job", "jobs")
PODS = Kind("", "v1", "Pod", "pods")
SERVICES = Kind("", "v1", "Service", "services")
SERVICE_ACCOUNTS = Kind("", "v1", "ServiceAccount", "serviceaccounts")
ROLES = Kind("rbac.authorization.k8s.io", "v1", "Role", "roles")
ROLE_BINDINGS = Kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
EVENTS = Kind("events.k8s.io", "v1", "Event", "events")
#: Where the operator writes Events: core/v1, as client-go's core/v1 recorder does.
CORE_EVENTS = Kind("", "v1", "Event", "events")
LEASES = Kind("coordination.k8s.io", "v1", "Lease", "leases")
NODES = Kind("", "v1", "Node", "nodes", namespaced=False)
NAMESPACES = Kind("", "v1", "Namespace", "namespaces", namespaced=False)
#: NVIDIA's DRA driver's (docs/design.md §3.9); served only where the driver is installed.
COMPUTE_DOMAINS = Kind("resource.nvidia.com", "v1beta1", "ComputeDomain", "computedomains")
POD_DISRUPTION_BUDGETS = Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")
RESOURCE_QUOTAS = Kind("", "v1", "ResourceQuota", "resourcequotas")
LIMIT_RANGES = Kind("", "v1", "LimitRange", "limitranges")
CRDS = Kind(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
)

_BY_API = {
    (k.api_version, k.kind): k
    for k in (
        RAYCLUSTERS,
        RAYJOBS,
        RAYSERVICES,
        BATCH_JOBS,
        PODS,
        SERVICES,
        SERVICE_ACCOUNTS,
        ROLES,
        ROLE_BINDINGS,
        EVENTS,
        LEASES,
        NAMESPACES,
        CRDS,
        COMPUTE_DOMAINS,
        POD_DISRUPTION_BUDGETS,
    )
}


def kind_of(obj: dict[str, object]) -> Kind:
    """The kind of an object by its apiVersion/kind (KeyError for a kind we do not handle)."""
    return _BY_API[(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))]
