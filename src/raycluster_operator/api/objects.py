"""Typed, read-only views of the Kubernetes objects the operator reads.

Objects arrive from the API server as JSON and stay plain dicts (``Obj``) in the cache and on
the wire: the operator patches and re-sends them, and a field it does not model must survive.
What it *reads* is named here once, with the API's defaults spelled out (an absent
``metadata.labels`` is an empty mapping, an absent ``deletionTimestamp`` is None), so a rule
reads ``pod.labels`` or ``pod.deleting`` instead of digging through nested ``.get`` calls.

The TypedDicts describe the shapes (the fields we read, all optional as on the wire); the view
classes wrap one body without copying it. A view costs one small object: it keeps the three
sub-objects (``metadata``, ``spec``, ``status``) it found, and every property is one lookup,
so a planner reading 16k pods pays no more than the dict digging it replaces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

#: A Kubernetes object as JSON: what the client sends and receives, and the cache holds.
Obj = dict[str, Any]


#: ``continue`` (where the next page starts; absent on the last page) is a Python keyword,
#: hence the functional form.
ListMetaBody = TypedDict("ListMetaBody", {"resourceVersion": str, "continue": str}, total=False)


class OwnerReferenceBody(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMetaBody(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReferenceBody]
    finalizers: list[str]


class ConditionBody(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class ContainerStatusBody(TypedDict, total=False):
    name: str
    ready: bool
    restartCount: int
    #: One key of ``waiting``, ``running``, ``terminated``.
    state: dict[str, Any]


class PodSpecBody(TypedDict, total=False):
    containers: list[dict[str, Any]]
    restartPolicy: str
    nodeName: str
    schedulingGates: list[dict[str, str]]


class PodStatusBody(TypedDict, total=False):
    phase: str
    podIP: str
    conditions: list[ConditionBody]
    containerStatuses: list[ContainerStatusBody]


class ServicePortBody(TypedDict, total=False):
    name: str
    port: int
    protocol: str


class ServiceSpecBody(TypedDict, total=False):
    clusterIP: str
    ports: list[ServicePortBody]


class LeaseSpecBody(TypedDict, total=False):
    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


# Shared empty defaults. Views never write through them; nothing else can reach them.
_NO_LIST_META: ListMetaBody = {}
_NO_META: ObjectMetaBody = {}
_NO_POD_SPEC: PodSpecBody = {}
_NO_POD_STATUS: PodStatusBody = {}
_NO_SERVICE_SPEC: ServiceSpecBody = {}
_NO_LEASE_SPEC: LeaseSpecBody = {}
_NO_STRINGS: Mapping[str, str] = {}
_NO_FIELDS: Mapping[str, Any] = {}


class ObjectList:
    """One page of a collection (``<Kind>List``): its items and where the next page or a
    watch resumes."""

    __slots__ = ("_meta", "body")

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self._meta: ListMetaBody = body.get("metadata") or _NO_LIST_META

    @property
    def items(self) -> list[Obj]:
        return list(self.body.get("items") or ())

    @property
    def resource_version(self) -> str:
        return str(self._meta.get("resourceVersion") or "")

    @property
    def continue_token(self) -> str | None:
        return self._meta.get("continue") or None


class Resource:
    """Any object: the metadata every kind shares."""

    __slots__ = ("_meta", "body")

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self._meta: ObjectMetaBody = body.get("metadata") or _NO_META

    @property
    def meta(self) -> Mapping[str, Any]:
        """The whole ``metadata``, for copying into a new object."""
        return self._meta

    @property
    def kind(self) -> str:
        return str(self.body.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.body.get("apiVersion") or "")

    @property
    def name(self) -> str:
        return self._meta.get("name") or ""

    @property
    def generate_name(self) -> str | None:
        return self._meta.get("generateName")

    @property
    def namespace(self) -> str | None:
        return self._meta.get("namespace")

    @property
    def key(self) -> str:
        """``namespace/name``, the cache's key ("" for a cluster-scoped object's namespace)."""
        return f"{self._meta.get('namespace') or ''}/{self._meta.get('name') or ''}"

    @property
    def uid(self) -> str | None:
        return self._meta.get("uid")

    @property
    def resource_version(self) -> str:
        return str(self._meta.get("resourceVersion") or "")

    @property
    def generation(self) -> int | None:
        value = self._meta.get("generation")
        return value if isinstance(value, int) else None

    @property
    def labels(self) -> Mapping[str, str]:
        return self._meta.get("labels") or _NO_STRINGS

    @property
    def annotations(self) -> Mapping[str, str]:
        return self._meta.get("annotations") or _NO_STRINGS

    @property
    def created(self) -> str:
        """``creationTimestamp`` (RFC 3339, sorts as text); "" when unknown."""
        return self._meta.get("creationTimestamp") or ""

    @property
    def deletion_timestamp(self) -> str | None:
        """When the grace period ends, once the object is being deleted; else None."""
        return self._meta.get("deletionTimestamp")

    @property
    def deleting(self) -> bool:
        """``deletionTimestamp`` is set: the object is going away (finalizers may hold it)."""
        return bool(self._meta.get("deletionTimestamp"))

    @property
    def finalizers(self) -> Sequence[str]:
        return self._meta.get("finalizers") or ()

    @property
    def owner_references(self) -> Sequence[OwnerReferenceBody]:
        return self._meta.get("ownerReferences") or ()

    @property
    def owner_uids(self) -> frozenset[str]:
        return frozenset(ref["uid"] for ref in self.owner_references if ref.get("uid"))

    def owner_names(self, kind: str) -> list[str]:
        """Names of the owners of ``kind`` (an owner reference is always in-namespace)."""
        return [str(ref.get("name")) for ref in self.owner_references if ref.get("kind") == kind]


class Pod(Resource):
    __slots__ = ("_spec", "_status")

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self._meta = body.get("metadata") or _NO_META
        self._spec: PodSpecBody = body.get("spec") or _NO_POD_SPEC
        self._status: PodStatusBody = body.get("status") or _NO_POD_STATUS

    @property
    def phase(self) -> str:
        """``Pending``, ``Running``, ``Succeeded``, ``Failed``, ``Unknown``; "" when unset."""
        return self._status.get("phase") or ""

    @property
    def pod_ip(self) -> str | None:
        return self._status.get("podIP")

    @property
    def node_name(self) -> str | None:
        return self._spec.get("nodeName")

    @property
    def restart_policy(self) -> str | None:
        return self._spec.get("restartPolicy")

    @property
    def containers(self) -> Sequence[Mapping[str, Any]]:
        return self._spec.get("containers") or ()

    @property
    def container_statuses(self) -> Sequence[ContainerStatusBody]:
        return self._status.get("containerStatuses") or ()

    @property
    def scheduling_gates(self) -> tuple[str, ...]:
        """The names of `spec.schedulingGates`: the pod is not scheduled while any is left."""
        return tuple(g.get("name", "") for g in self._spec.get("schedulingGates") or ())

    @property
    def conditions(self) -> Sequence[ConditionBody]:
        return self._status.get("conditions") or ()

    @property
    def ready(self) -> bool:
        """The ``Ready`` condition is ``True``: the kubelet routes traffic to the pod."""
        for condition in self._status.get("conditions") or ():
            if condition.get("type") == "Ready":
                return condition.get("status") == "True"
        return False


class Service(Resource):
    __slots__ = ("_spec",)

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self._meta = body.get("metadata") or _NO_META
        self._spec: ServiceSpecBody = body.get("spec") or _NO_SERVICE_SPEC

    @property
    def cluster_ip(self) -> str | None:
        """The virtual IP; None when unset or ``None`` (a headless service has none)."""
        ip = self._spec.get("clusterIP")
        return str(ip) if ip and ip != "None" else None

    @property
    def headless(self) -> bool:
        return self._spec.get("clusterIP") == "None"

    @property
    def ports(self) -> Sequence[ServicePortBody]:
        return self._spec.get("ports") or ()


class Lease(Resource):
    __slots__ = ("_spec",)

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self._meta = body.get("metadata") or _NO_META
        self._spec: LeaseSpecBody = body.get("spec") or _NO_LEASE_SPEC

    @property
    def spec(self) -> LeaseSpecBody:
        return self._spec

    @property
    def holder(self) -> str:
        return str(self._spec.get("holderIdentity") or "")

    @property
    def renew_time(self) -> str:
        return str(self._spec.get("renewTime") or "")

    @property
    def duration_seconds(self) -> float | None:
        value = self._spec.get("leaseDurationSeconds")
        return float(value) if value else None

    @property
    def transitions(self) -> int:
        return int(self._spec.get("leaseTransitions") or 0)


class RayClusterObject(Resource):
    """A RayCluster as stored, before (or instead of) parsing its spec: a cluster whose spec
    does not parse must still be deleted, cleaned up and reported on."""

    __slots__ = ()

    @property
    def spec(self) -> Mapping[str, Any]:
        spec = self.body.get("spec")
        return spec if isinstance(spec, Mapping) else _NO_FIELDS

    @property
    def status(self) -> Mapping[str, Any]:
        status = self.body.get("status")
        return status if isinstance(status, Mapping) else _NO_FIELDS

    @property
    def managed_by(self) -> str | None:
        value = self.spec.get("managedBy")
        return str(value) if value else None
