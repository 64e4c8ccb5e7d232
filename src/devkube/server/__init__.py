"""An in-process Kubernetes API server ("envtest in Python") for the dev cluster and tests.

`ApiServer(host, port, token, faults, extra_sans)` serves HTTPS with bearer tokens (`token` is
the admin's; ServiceAccount tokens come from TokenRequest) and RBAC; kubectl, the official
`kubernetes` client, lightkube and Ray's KubeRay client work against it unchanged.

Implemented as the real server does it:
- discovery (legacy /api, /apis documents), /version, /healthz, /readyz, /livez, and an
  /openapi/v3 that tells kubectl the server validates fields itself;
- one global resourceVersion; uid, creationTimestamp, generation (bumped on spec changes,
  for kinds that track it), generateName (5 random characters, redrawn if taken);
- status (and scale) subresources kept apart from the main resource; no-op writes change
  nothing; 409 AlreadyExists / Conflict (stale resourceVersion on PUT and PATCH, DeleteOptions
  preconditions), 404, 422 Invalid (names, labels, owner references, pods, services), 415 for
  strategic merge on custom resources, all as `Status` bodies;
- json-patch (with the json-patch v4 quirk the real server keeps: `replace` of an absent object
  member adds it), RFC 7386 merge patch, strategic merge for built-in kinds by Kubernetes'
  merge keys and directives;
- finalizers, graceful pod deletion (deletionTimestamp + grace; the kubelet finishes it),
  Foreground/Orphan propagation recorded as the `foregroundDeletion`/`orphan` finalizers a
  garbage collector acts on, namespace deletion that empties the namespace first;
- label and field selectors on list, watch and deletecollection; limit/continue;
- watch: state-then-follow for resourceVersion unset/"0", resume from a bounded per-resource
  history, 410 Expired as an ERROR event, bookmarks (on resume and periodically),
  sendInitialEvents with the initial-events-end bookmark, selector transitions as
  ADDED/DELETED, timeoutSeconds, slow watchers cut with 410 rather than slowing writers;
- CRDs: served as soon as created (Established/NamesAccepted conditions), unserved and
  emptied when deleted; structural schemas as kube-apiserver applies them (`structural`:
  validation worded as kube-openapi, pruning, defaulting on write and on read) on every write
  path; `fieldValidation` Strict/Warn/Ignore (Warn, the default, answers `Warning` headers);
  schemas published in `/openapi/v3` for `kubectl explain`; printer columns in `kubectl get`;
- built-in kinds decoded against Kubernetes' OpenAPI (`builtin`): unknown fields dropped and
  reported per `fieldValidation`, wrongly typed values refused with Go's unmarshal message;
- core/v1 and events.k8s.io/v1 Events share storage (written as one, read as either);
- authentication (auth.py: admin token, ServiceAccount JWTs from TokenRequest, 401), RBAC
  authorization of every request with kube's 403 wording (rbac.py, requestinfo.py),
  escalation prevention (admission.py), impersonation, access/rules/subject reviews
  (reviews.py), a `default` ServiceAccount per namespace and the bootstrap discovery roles.

Approximated (documented so nobody relies on more):
- server-side apply (application/apply-patch+yaml) creates the object if missing and otherwise
  merges the applied configuration (strategic merge for built-in kinds, merge patch for custom
  resources): no managedFields, no field ownership, no conflicts, nothing is removed;
- lists are always served from the latest state: resourceVersion/resourceVersionMatch on a
  list and continue tokens do not pin a snapshot;
- built-in kinds are stored with a few defaults (pods, services, namespaces); beyond their
  types, only the hand-written rules of `validation` apply; no quotas, no admission beyond
  ServiceAccounts, RBAC escalation and default tolerations; no aggregated ClusterRoles
  (admin/edit/view), no legacy token Secrets, no client certificates; the cluster's own
  controllers act as the admin;
- CRD schemas: no CEL rules (`x-kubernetes-validations`), `uniqueItems`, `multipleOf`,
  list/map-type checks or string formats; a CRD's own schema is only checked for types and
  defaults;
- protobuf request bodies are decoded for every served built-in kind (field numbers from the
  kubectl binary's Go types, `protobuf.py`); CBOR and protobuf bodies of custom resources get
  415, as kube-apiserver answers them;
- CRD versions share storage without conversion (apiVersion is rewritten);
- apps/v1, policy/v1 and scheduling.k8s.io/v1 kinds are stored only, nothing acts on them;
- pods/log answers from `ApiServer.log_source` when a kubelet runtime provides one;
  pods/exec, attach and portforward speak WebSocket only (v5/v4.channel.k8s.io, SPDY/3.1
  tunnelled for port-forward) and are served by `ApiServer.stream_backend`.
"""

from __future__ import annotations

from .app import ApiServer
from .errors import ApiError
from .faults import FaultRule, Faults
from .logs import LogRequest, LogSource
from .streaming import Connection, ExecIO, ExecRequest, StreamBackend, StreamRefused

__all__ = [
    "ApiError",
    "ApiServer",
    "Connection",
    "ExecIO",
    "ExecRequest",
    "FaultRule",
    "Faults",
    "LogRequest",
    "LogSource",
    "StreamBackend",
    "StreamRefused",
]
