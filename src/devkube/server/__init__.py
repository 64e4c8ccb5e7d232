"""The dev cluster's Kubernetes API server over HTTPS: kubectl, the official `kubernetes`
client, lightkube and Ray's KubeRay client work against it unchanged.

What it implements, and what it only approximates, is docs/design.md §8 ("API server",
"Schemas", "Request pipeline", "Admission", "Approximated"). Its rooms, as kube-apiserver draws
itself, each using only the rooms below it (import-linter): `app` composes them;
`endpoints/` (REST handlers, watch, tables, discovery, OpenAPI, logs, streaming);
`admission/` (ServiceAccounts, RBAC escalation, tolerations, LimitRange, Pod Security,
ResourceQuota, eviction); `auth/` (identities, tokens, RBAC, reviews); `registry/` (object
semantics, the store, served kinds, per-kind strategies); `schema/` (structural schemas, CEL
rules, built-in types, protobuf). `errors`, `faults` and `tls` serve them all.
"""

from __future__ import annotations

from devkube.server.app import ApiServer
from devkube.server.endpoints.logs import LogRequest, LogSource
from devkube.server.endpoints.streaming import (
    Connection,
    ExecIO,
    ExecRequest,
    StreamBackend,
    StreamRefused,
)
from devkube.server.errors import ApiError
from devkube.server.faults import FaultRule, Faults

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
