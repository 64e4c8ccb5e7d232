"""The kinds the server knows: the built-in table and the registry CRDs extend at run time."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One served resource (a group/version/plural) and how the server treats its objects."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    builtin: bool = True
    tracks_generation: bool = True
    # CRD-only: the openAPIV3Schema of this version (defaults and pruning) and scale paths.
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    scale: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    # Set when another resource owns the storage (events.k8s.io Events live with core Events).
    storage: str = ""
    # Review kinds are answered, never stored (POST only).
    verbs: tuple[str, ...] = ALL_VERBS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        """Versions of one resource share storage, like the real server's etcd key prefix."""
        if self.storage:
            return self.storage
        if not self.group:
            return self.plural
        return f"{self.plural}.{self.group}"

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()

    @property
    def status_subresource(self) -> bool:
        return "status" in self.subresources


def _core(
    plural: str,
    kind: str,
    namespaced: bool = True,
    *,
    short: tuple[str, ...] = (),
    sub: tuple[str, ...] = (),
    spec: bool = True,
    categories: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        "",
        "v1",
        plural,
        kind,
        namespaced,
        short_names=short,
        subresources=frozenset(sub),
        tracks_generation=spec,
        categories=categories,
    )


def _grouped(
    group: str, plural: str, kind: str, namespaced: bool = True, *, short: tuple[str, ...] = ()
) -> ResourceType:
    return ResourceType(
        group, "v1", plural, kind, namespaced, short_names=short, tracks_generation=False
    )


def _apps(plural: str, kind: str, short: str, *sub: str) -> ResourceType:
    """An apps/v1 workload: namespaced, listed by `kubectl get all`."""
    return ResourceType(
        "apps",
        "v1",
        plural,
        kind,
        True,
        short_names=(short,),
        subresources=frozenset(sub),
        categories=("all",),
    )


BUILTIN: tuple[ResourceType, ...] = (
    _core("namespaces", "Namespace", False, short=("ns",), sub=("status",), spec=False),
    _core(
        "pods",
        "Pod",
        short=("po",),
        sub=("status", "binding", "eviction", "log", "exec", "attach", "portforward"),
        categories=("all",),
    ),
    _core("services", "Service", short=("svc",), sub=("status",), spec=False, categories=("all",)),
    _core("endpoints", "Endpoints", short=("ep",), spec=False),
    _core("configmaps", "ConfigMap", short=("cm",), spec=False),
    _core("secrets", "Secret", spec=False),
    _core("serviceaccounts", "ServiceAccount", short=("sa",), spec=False),
    _core("events", "Event", short=("ev",), spec=False),
    _core("nodes", "Node", False, short=("no",), sub=("status",), spec=False),
    ResourceType(
        "events.k8s.io",
        "v1",
        "events",
        "Event",
        True,
        # no "ev" short name: kubectl would warn that it is ambiguous with core Events
        tracks_generation=False,
        storage="events",
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, tracks_generation=False),
    _grouped("rbac.authorization.k8s.io", "roles", "Role"),
    _grouped("rbac.authorization.k8s.io", "rolebindings", "RoleBinding"),
    _grouped("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", False),
    _grouped("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", False),
    # Deployments and ReplicaSets have controllers (devkube.controllers.deployments and
    # devkube.controllers.replicasets);
    # Jobs have devkube.controllers.jobs;
    # StatefulSets and DaemonSets are stored only, so manifests that carry them apply cleanly.
    _apps("deployments", "Deployment", "deploy", "status", "scale"),
    _apps("statefulsets", "StatefulSet", "sts", "status", "scale"),
    _apps("replicasets", "ReplicaSet", "rs", "status", "scale"),
    _apps("daemonsets", "DaemonSet", "ds", "status"),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "Job",
        True,
        subresources=frozenset({"status"}),
        categories=("all",),
    ),
    _core("resourcequotas", "ResourceQuota", short=("quota",), sub=("status",), spec=False),
    _core("limitranges", "LimitRange", short=("limits",), spec=False),
    # Dynamic Resource Allocation (resource.k8s.io/v1).
    _grouped("resource.k8s.io", "deviceclasses", "DeviceClass", False),
    ResourceType(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        True,
        subresources=frozenset({"status"}),
    ),
    _grouped("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate"),
    _grouped("resource.k8s.io", "resourceslices", "ResourceSlice", False),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        False,
        short_names=("pc",),
        tracks_generation=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        False,
        tracks_generation=False,
        verbs=("create",),
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        False,
        tracks_generation=False,
        verbs=("create",),
    ),
    ResourceType(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        False,
        tracks_generation=False,
        verbs=("create",),
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        False,
        tracks_generation=False,
        verbs=("create",),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        subresources=frozenset({"status"}),
    ),
)


class Registry:
    """Served resources by (group, version, plural); CRDs add and remove entries live."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._types if k[0] == group and k[2] == plural]:
            del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def versions_of(self, group: str) -> list[str]:
        seen = dict.fromkeys(v for g, v, _ in self._types if g == group)
        return list(seen)

    def groups(self) -> list[str]:
        return list(dict.fromkeys(g for g, _, _ in self._types if g))

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self._types.items() if g == group and v == version]
