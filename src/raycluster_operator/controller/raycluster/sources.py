"""Sources: the informers, and which RayCluster each change concerns.

As controller-runtime draws it, a source turns the watch of one kind into the keys of the
objects the controller reconciles: a RayCluster is its own key, a pod names its cluster in the
``ray.io/cluster`` label, a service names it in its owner reference, the autoscaler's
ServiceAccount/Role/RoleBinding carry the label too (watched by it, so that deleting one is
healed by the next pass, and a converged cluster costs no request to check them), and a Node
concerns every cluster with a pod bound to it (host-loss failover,
planning/features/host_loss.py; the pods are found by ``spec.nodeName`` in the pod cache). Listeners
get each change as a ``Change``; the caches are read through ``Caches``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api.labels import CLUSTER, CREATED_BY
from raycluster_operator.api.objects import Obj, Resource
from raycluster_operator.controller.raycluster.quotas import QuotaWatch
from raycluster_operator.controller.raycluster.transforms import (
    slim_budget,
    slim_named,
    slim_node,
    slim_pod,
    slim_service,
    without_managed_fields,
)
from raycluster_operator.controller.runtime.informer import Handler, Informer, Transform
from raycluster_operator.controller.runtime.store import (
    IndexFunc,
    StoreView,
    by_label,
    by_namespace,
    by_owner,
    object_key,
)
from raycluster_operator.kube import (
    COMPUTE_DOMAINS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    RAYCLUSTERS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Forbidden,
    Kind,
    KubeClient,
    NotFound,
)
from raycluster_operator.planning.feature import Route
from raycluster_operator.planning.lifecycle import FEATURE_TYPES

log = logging.getLogger(__name__)

#: Index names of the caches.
BY_CLUSTER = "cluster"
BY_OWNER = "owner"
BY_NAMESPACE = "namespace"
#: Pods by ``spec.nodeName``.
BY_NODE = "node"
#: The autoscaler's RBAC kinds the operator creates for an autoscaling cluster.
RBAC_KINDS = (SERVICE_ACCOUNTS, ROLES, ROLE_BINDINGS)


def feature_kinds() -> dict[str, Kind]:
    """The kinds ``lifecycle.FEATURES`` watch with ``Route.LABEL``: each gets label-selected
    informers of its own (``Sources.watched``). Every other route is one of the caches
    ``Sources`` keeps by hand: Nodes (``Route.NODE``, by the pods bound to them), quotas and
    LimitRanges (``Route.NAMESPACE``, ``QuotaWatch``), budgets (``Route.LABEL_OR_NAMESPACE``,
    only while Nodes are watched), ComputeDomains (``Route.LABEL_WHERE_SERVED``)."""
    out: dict[str, Kind] = {}
    for feature in FEATURE_TYPES:
        for w in feature.watches:
            if w.route is Route.LABEL:
                out.setdefault(w.kind, Kind(w.group, w.version, w.kind, w.plural, w.namespaced))
    return out


@dataclass(frozen=True)
class SourceOptions:
    #: Namespaces to watch; empty means all namespaces.
    namespaces: tuple[str, ...] = ()
    #: Seconds a watch request stays open before it is renewed.
    watch_timeout: int = 300


@dataclass(frozen=True)
class Change:
    """Something the caches saw happen to an object of a RayCluster."""

    #: ``namespace/name`` of the RayCluster the change concerns.
    key: str
    kind: str
    name: str
    #: Deleted, or (a pod) terminating.
    gone: bool
    #: False for the previous version of an object whose cluster label changed: the old
    #: cluster is worth a look, but nothing was observed about its writes.
    observed: bool = True


Listener = Callable[[Change], None]


@dataclass(frozen=True)
class Caches:
    """What a reconcile reads, never the API: the caches of every watched namespace as one."""

    clusters: StoreView
    #: Indexed ``BY_CLUSTER`` (``ns/cluster``).
    pods: StoreView
    #: Indexed ``BY_OWNER`` (``ns/cluster``) and ``BY_NAMESPACE``.
    services: StoreView
    #: By kind; indexed ``BY_NAMESPACE``.
    rbac: Mapping[str, StoreView]
    #: Nodes (cluster-scoped, key ``/name``); None when nodes are not watched.
    nodes: StoreView | None = None
    #: ComputeDomains of the clusters (indexed ``BY_CLUSTER``); empty unless served.
    domains: StoreView | None = None
    #: Kinds the cluster turned out to serve at start (``ComputeDomain``): filled once by
    #: ``Sources.detect`` before the informers start.
    served: set[str] = field(default_factory=set)
    #: The per-slice PodDisruptionBudgets (rule 12b), indexed ``BY_CLUSTER`` and
    #: ``BY_NAMESPACE``; None when nodes are not watched (no planned disruptions).
    budgets: StoreView | None = None
    #: ResourceQuotas by namespace (rule 13c); answers None when they are not watched.
    quotas: QuotaWatch | None = None
    #: Other kinds the features watch (``feature_kinds``), by kind, indexed ``BY_CLUSTER``.
    watched: Mapping[str, StoreView] = field(default_factory=dict)


class Sources:
    def __init__(
        self,
        client: KubeClient,
        options: SourceOptions = SourceOptions(),
        *,
        watch_nodes: bool = False,
    ) -> None:
        self._namespaces: list[str | None] = list(options.namespaces) or [None]
        make = functools.partial(self._informers, client, options.watch_timeout)
        # Each cache keeps only what the operator reads of its kind (transforms.py).
        self.clusters = make(RAYCLUSTERS, self._on_cluster, transform=without_managed_fields)
        self.pods = make(
            PODS,
            self._on_pod,
            label_selector=CLUSTER,
            indexers={BY_CLUSTER: by_label(CLUSTER), BY_NODE: _by_node},
            transform=slim_pod,
        )
        # Host loss: Nodes are cluster-scoped, one informer whatever the namespaces.
        self.nodes: list[Informer] = []
        if watch_nodes:
            node_informer = Informer(
                client, NODES, watch_timeout=options.watch_timeout, transform=slim_node
            )
            node_informer.add_handler(self._on_node)
            self.nodes = [node_informer]
        # Planned disruptions (rule 12b) keep a budget per slice, labelled with the cluster;
        # every budget of the namespace is watched, as a user's over the same pods makes ours
        # stand back (planning/budget_overlap.py).
        self.budgets: list[Informer] = []
        if watch_nodes:
            self.budgets = make(
                POD_DISRUPTION_BUDGETS,
                self._on_budget,
                indexers={BY_CLUSTER: by_label(CLUSTER), BY_NAMESPACE: by_namespace},
                transform=slim_budget,
            )
        self.services = make(
            SERVICES,
            self._on_service,
            indexers={BY_OWNER: by_owner("RayCluster"), BY_NAMESPACE: by_namespace},
            transform=slim_service,
        )
        self.rbac = {
            kind.kind: make(
                kind,
                functools.partial(self._on_rbac, kind.kind),
                label_selector=CLUSTER,
                indexers={BY_NAMESPACE: by_namespace},
                transform=slim_named,
            )
            for kind in RBAC_KINDS
        }
        # NVIDIA's DRA driver's kind (docs/design.md §3.9): watched only where it is served.
        self.domains = make(
            COMPUTE_DOMAINS,
            self._on_domain,
            label_selector=CLUSTER,
            indexers={BY_CLUSTER: by_label(CLUSTER)},
            transform=without_managed_fields,
        )
        # Rule 13c: the namespaces' quotas, when the operator may read them (probed at start).
        self.quotas = QuotaWatch(
            client, self._namespaces, options.watch_timeout, self._on_quota_namespace
        )
        # Whatever else a lifecycle feature plans from, found by the cluster's label.
        self.watched = {
            name: make(
                kind,
                functools.partial(self._on_rbac, name),
                label_selector=CLUSTER,
                indexers={BY_CLUSTER: by_label(CLUSTER)},
                transform=without_managed_fields,
            )
            for name, kind in feature_kinds().items()
        }
        self.caches = self._caches()
        self._listeners: list[Listener] = []

    def _caches(self) -> Caches:
        return Caches(
            clusters=_view(self.clusters),
            pods=_view(self.pods),
            services=_view(self.services),
            rbac={kind: _view(infs) for kind, infs in self.rbac.items()},
            nodes=_view(self.nodes) if self.nodes else None,
            domains=_view(self.domains),
            budgets=_view(self.budgets) if self.budgets else None,
            quotas=self.quotas,
            watched={name: _view(infs) for name, infs in self.watched.items()},
        )

    def _informers(
        self,
        client: KubeClient,
        watch_timeout: int,
        kind: Kind,
        handler: Handler,
        *,
        label_selector: str | None = None,
        indexers: dict[str, IndexFunc] | None = None,
        transform: Transform | None = None,
    ) -> list[Informer]:
        out = []
        for ns in self._namespaces:
            informer = Informer(
                client,
                kind,
                namespace=ns,
                label_selector=label_selector,
                indexers=indexers,
                transform=transform,
                watch_timeout=watch_timeout,
            )
            informer.add_handler(handler)
            out.append(informer)
        return out

    @property
    def informers(self) -> list[Informer]:
        rbac = [inf for infs in self.rbac.values() for inf in infs]
        watched = [inf for infs in self.watched.values() for inf in infs]
        domains = self.domains if COMPUTE_DOMAINS.kind in self.caches.served else []
        return (
            self.clusters
            + self.pods
            + self.services
            + rbac
            + self.nodes
            + self.budgets
            + domains
            + self.quotas.informers
            + self.quotas.limit_informers
            + watched
        )

    async def detect(self, client: KubeClient) -> None:
        """Whether ComputeDomains are served (NVIDIA's DRA driver installed): a list of one
        namespace. Without them the operator runs as before, slices without domains, and
        says so here and in a ``ComputeDomainsUnavailable`` Event per slice that wanted one."""
        try:
            await client.list(COMPUTE_DOMAINS, self._namespaces[0], page_size=1)
        except NotFound:
            log.warning(
                "ComputeDomains (resource.nvidia.com/v1beta1) are not served: NVIDIA's DRA "
                "driver is not installed; GB200/GB300 slices run without IMEX channels"
            )
            return
        except Forbidden as error:
            log.warning("ComputeDomains cannot be listed (%s): slices run without them", error)
            return
        self.caches.served.add(COMPUTE_DOMAINS.kind)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    async def wait_synced(self) -> None:
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers))

    # -- event -> key ----------------------------------------------------------------------

    def _emit(self, change: Change) -> None:
        for listener in self._listeners:
            listener(change)

    def _on_cluster(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is not None:
            self._emit(Change(object_key(obj), "RayCluster", _name(obj), etype == "DELETED"))

    def _on_pod(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        current = new or old
        for obj in (old, new):
            if obj is None:
                continue
            pod = Resource(obj)
            cluster = pod.labels.get(CLUSTER)
            if not cluster:
                continue
            gone = etype == "DELETED" or pod.deleting
            key = f"{pod.namespace or ''}/{cluster}"
            self._emit(Change(key, "Pod", _name(obj), gone, observed=obj is current))

    def _on_service(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        service = Resource(obj)
        for owner in service.owner_names("RayCluster"):
            key = f"{service.namespace or ''}/{owner}"
            self._emit(Change(key, "Service", service.name, etype == "DELETED"))

    def _on_rbac(self, kind: str, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        rbac = Resource(obj)
        cluster = rbac.labels.get(CLUSTER)
        if cluster:
            key = f"{rbac.namespace or ''}/{cluster}"
            self._emit(Change(key, kind, _name(obj), etype == "DELETED"))

    def _on_budget(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        """Ours concern their cluster; a user's, every cluster of its namespace, when it comes,
        goes or selects anew (the cache keeps no status, so its updates are mostly no-ops)."""
        obj = new or old
        if obj is None:
            return
        budget = Resource(obj)
        if budget.labels.get(CREATED_BY) == OPERATOR_NAME:
            self._on_rbac(POD_DISRUPTION_BUDGETS.kind, etype, old, new)
            return
        if old is not None and new is not None and _selector(old) == _selector(new):
            return
        gone = etype == "DELETED"
        prefix = f"{budget.namespace or ''}/"
        for key in sorted(_view(self.clusters).all_keys()):
            if key.startswith(prefix):
                self._emit(
                    Change(key, POD_DISRUPTION_BUDGETS.kind, budget.name, gone, observed=False)
                )

    def _on_domain(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        obj = new or old
        if obj is None:
            return
        domain = Resource(obj)
        cluster = domain.labels.get(CLUSTER)
        if cluster:
            key = f"{domain.namespace or ''}/{cluster}"
            self._emit(Change(key, COMPUTE_DOMAINS.kind, domain.name, etype == "DELETED"))

    def _on_node(self, etype: str, old: Obj | None, new: Obj | None) -> None:
        """Every cluster with a pod on the node is worth a look (nothing to observe)."""
        obj = new or old
        if obj is None:
            return
        node = _name(obj)
        keys = set()
        for pod in _view(self.pods).by_index(BY_NODE, node):
            view = Resource(pod)
            cluster = view.labels.get(CLUSTER)
            if cluster:
                keys.add(f"{view.namespace or ''}/{cluster}")
        for key in sorted(keys):
            self._emit(Change(key, "Node", node, etype == "DELETED", observed=False))

    def _on_quota_namespace(self, namespace: str) -> None:
        """A quota changed: every cluster of its namespace may now fit (or no longer)."""
        for key in sorted(_view(self.clusters).all_keys()):
            if key.startswith(f"{namespace}/"):
                self._emit(Change(key, "ResourceQuota", "", False, observed=False))


def _by_node(obj: Obj) -> list[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


def _selector(obj: Obj) -> object:
    return (obj.get("spec") or {}).get("selector"), bool(
        (obj.get("metadata") or {}).get("deletionTimestamp")
    )


def _view(informers: list[Informer]) -> StoreView:
    return StoreView([i.store for i in informers])


def _name(obj: Obj) -> str:
    return Resource(obj).name
