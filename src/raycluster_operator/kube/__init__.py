"""The one adapter over the Kubernetes client library: plain dicts, a small error set."""

from raycluster_operator.api.objects import Obj
from raycluster_operator.kube.client import KubeClient, ListResult
from raycluster_operator.kube.config import load_config
from raycluster_operator.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
)
from raycluster_operator.kube.pruning import prune
from raycluster_operator.kube.resources import (
    BATCH_JOBS,
    CRDS,
    EVENTS,
    LEASES,
    NODES,
    PODS,
    RAYCLUSTERS,
    RAYJOBS,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    Kind,
    kind_of,
)

__all__ = [
    "BATCH_JOBS",
    "CRDS",
    "EVENTS",
    "LEASES",
    "NODES",
    "PODS",
    "RAYCLUSTERS",
    "RAYJOBS",
    "ROLES",
    "ROLE_BINDINGS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "AlreadyExists",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "Kind",
    "KubeClient",
    "KubeError",
    "ListResult",
    "NotFound",
    "Obj",
    "ServerError",
    "TooManyRequests",
    "kind_of",
    "load_config",
    "prune",
]
