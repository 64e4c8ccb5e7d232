"""The values one RayService pass reads and writes (docs/design.md §12): what was observed
(the RayService, the clusters it owns with their pods, each head's Serve API answer), the
context of the pass, and the plan it yields (status, actions, Events)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from raycluster_operator.api.objects import Obj


class ActionKind(StrEnum):
    CREATE_CLUSTER = "CreateCluster"
    UPDATE_CLUSTER = "UpdateCluster"
    DELETE_CLUSTER = "DeleteCluster"
    DEPLOY_SERVE = "DeployServe"
    CREATE_SERVICE = "CreateService"
    PATCH_SERVICE = "PatchService"
    LABEL_POD = "LabelPod"


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    #: The object's name (the cluster a Serve config goes to, for DeployServe).
    name: str = ""
    body: Obj = field(default_factory=dict)


@dataclass(frozen=True)
class ServeAnswer:
    """What one cluster's head said, asked this pass (``asked`` False: its head is not ready,
    or it was not asked), and what the proxies of its multi-host slices' hosts said."""

    asked: bool = False
    #: The Serve REST API answered ``GET /api/serve/applications/``.
    reachable: bool = False
    #: Its ``applications``: name -> {status, message, deployments: {name: {status, message}}}.
    applications: Mapping[str, Any] = field(default_factory=dict)
    #: The head's Serve proxy answered ``/-/healthz``.
    proxy_healthy: bool = False
    #: Each running and ready host of a multi-host slice, by pod name: its own Serve proxy
    #: answered ``/-/healthz`` (Serve runs one only where a replica runs, docs/design.md RS4).
    proxies: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Observed:
    rayservice: Obj
    #: The RayClusters the service owns, by name.
    clusters: Mapping[str, Obj] = field(default_factory=dict)
    #: Their pods, by cluster name.
    pods: Mapping[str, Sequence[Obj]] = field(default_factory=dict)
    #: Each asked cluster's Serve API answer, by cluster name.
    serve: Mapping[str, ServeAnswer] = field(default_factory=dict)
    #: serveConfigV2 as last deployed to each cluster by this operator (KubeRay's cache): a
    #: restarted operator deploys once more, which Serve takes as a no-op.
    deployed: Mapping[str, str] = field(default_factory=dict)
    #: The serve service, if it exists.
    serve_service: Obj | None = None
    #: Whether the API server serves the Gateway API (``gateway.networking.k8s.io``).
    gateway_api: bool = False
    #: Since when each cluster neither active nor pending has been seen so (deletion delay).
    dangling_since: Mapping[str, datetime] = field(default_factory=dict)
    #: The RayService's own ``<name>-head-svc``, if it exists.
    head_service: Obj | None = None


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    note: str


@dataclass
class Plan:
    status: Obj
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None


@dataclass(frozen=True)
class Context:
    now: datetime
    #: Five random characters for a new cluster's name.
    suffix: str
    #: Seconds between passes while the service waits on its clusters or Serve.
    poll: float = 2.0
