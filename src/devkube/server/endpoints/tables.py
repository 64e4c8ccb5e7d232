"""Server-side printing (meta.k8s.io Table), which `kubectl get` asks for first.

Built-in kinds get the familiar columns of the real server (pods, nodes, services,
namespaces, events, deployments, replicasets, leases, poddisruptionbudgets); custom resources
get Name, their additionalPrinterColumns and Age.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from devkube.server.registry.resources import ResourceType
from kubefacts.objects import Obj
from kubefacts.timestamps import parse_time

Column = tuple[str, str, int, Callable[[Obj], Any]]  # name, type, priority, cell


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(timestamp: str | None, now: datetime | None = None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return "<invalid>"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def json_path(obj: Any, path: str) -> Any:
    """The subset of JSONPath printer columns use: .a.b, .a[0].b, .a[*].b."""
    cur: list[Any] = [obj]
    for token in re.findall(r"[^.\[\]]+|\[\*\]|\[\d+\]", path.strip("{}").lstrip(".")):
        nxt: list[Any] = []
        for value in cur:
            if token == "[*]" and isinstance(value, list):
                nxt.extend(value)
            elif token.startswith("[") and isinstance(value, list):
                idx = int(token[1:-1])
                if idx < len(value):
                    nxt.append(value[idx])
            elif isinstance(value, Mapping) and token in value:
                nxt.append(value[token])
        cur = nxt
    if not cur:
        return None
    return cur[0] if len(cur) == 1 else ",".join(str(v) for v in cur)


def _name(obj: Obj) -> Any:
    return obj["metadata"]["name"]


def _age(obj: Obj) -> Any:
    return age(obj["metadata"].get("creationTimestamp"))


def _pod_status(pod: Obj) -> str:
    status = pod.get("status") or {}
    phase = status.get("reason") or status.get("phase") or "Unknown"
    for s in status.get("containerStatuses") or []:
        state = s.get("state") or {}
        detail = state.get("waiting") or state.get("terminated")
        if detail and detail.get("reason"):
            phase = detail["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return str(phase)


def _pod_ready(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_restarts(pod: Obj) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


def _node_status(node: Obj) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    text = "Ready" if ready and ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(node: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = [k[len(prefix) :] for k in node["metadata"].get("labels") or {} if k.startswith(prefix)]
    return ",".join(sorted(r for r in roles if r)) or "<none>"


def _service_ports(svc: Obj) -> str:
    ports = (svc.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _event_object(ev: Obj) -> str:
    ref = ev.get("involvedObject") or ev.get("regarding") or {}
    return f"{str(ref.get('kind', '')).lower()}/{ref.get('name', '')}"


def _event_last_seen(ev: Obj) -> str:
    series = ev.get("series") or {}
    stamp = (
        series.get("lastObservedTime")
        or ev.get("lastTimestamp")
        or ev.get("deprecatedLastTimestamp")
        or ev.get("eventTime")
        or ev["metadata"].get("creationTimestamp")
    )
    return age(stamp)


def _containers(template_owner: Obj) -> list[Mapping[str, Any]]:
    spec = ((template_owner.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers: list[Mapping[str, Any]] = spec.get("containers") or []
    return containers


def _selector(obj: Obj) -> str:
    """A label selector as kubectl prints it (matchLabels as k=v, expressions as k op (v))."""
    selector = (obj.get("spec") or {}).get("selector") or {}
    terms = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        values = ",".join(expr.get("values") or [])
        op = str(expr.get("operator", ""))
        key = str(expr.get("key", ""))
        terms.append(
            {"Exists": key, "DoesNotExist": f"!{key}"}.get(op, f"{key} {op.lower()} ({values})")
        )
    return ",".join(terms) or "<none>"


def _int(obj: Obj, section: str, key: str) -> int:
    return int((obj.get(section) or {}).get(key) or 0)


def _spec_replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _budget_bound(pdb: Obj, key: str) -> str:
    """A budget's minAvailable or maxUnavailable as kube's printer shows it: N/A when unset."""
    value = (pdb.get("spec") or {}).get(key)
    return "N/A" if value is None else str(value)


def _quota_column(limits: bool) -> Callable[[Obj], str]:
    """kube's printResourceQuota: `name: used/hard` per hard name, limits.* in their own column."""

    def cell(quota: Obj) -> str:
        hard = (quota.get("status") or {}).get("hard") or {}
        used = (quota.get("status") or {}).get("used") or {}
        parts = [
            f"{name}: {used.get(name, '0')}/{hard.get(name, '0')}"
            for name in sorted((quota.get("spec") or {}).get("hard") or {})
            if (name.split(".")[0] == "limits" and "." in name) == limits
        ]
        return ", ".join(parts)

    return cell


_WORKLOAD_WIDE: list[Column] = [
    ("Containers", "string", 1, lambda o: ",".join(str(c.get("name")) for c in _containers(o))),
    ("Images", "string", 1, lambda o: ",".join(str(c.get("image")) for c in _containers(o))),
    ("Selector", "string", 1, _selector),
]


def _job_status(job: Obj) -> str:
    """kubectl's Job STATUS: the terminal or suspended condition, else Running."""
    held = {
        c.get("type")
        for c in (job.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    for kind, shown in (
        ("Complete", "Complete"),
        ("Failed", "Failed"),
        ("FailureTarget", "FailureTarget"),
        ("SuccessCriteriaMet", "SuccessCriteriaMet"),
        ("Suspended", "Suspended"),
    ):
        if kind in held:
            return shown
    return "Running"


def _job_completions(job: Obj) -> str:
    completions = (job.get("spec") or {}).get("completions")
    done = _int(job, "status", "succeeded")
    return f"{done}/{completions}" if completions is not None else f"{done}/1 of 1"


def _job_duration(job: Obj) -> str:
    status = job.get("status") or {}
    start = status.get("startTime")
    if not start:
        return ""
    end = status.get("completionTime")
    if not end:
        return age(str(start))
    return age(str(start), parse_time(str(end)))


_BUILTIN: dict[str, list[Column]] = {
    "jobs": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, _job_status),
        ("Completions", "string", 0, _job_completions),
        ("Duration", "string", 0, _job_duration),
        ("Age", "string", 0, _age),
        *_WORKLOAD_WIDE,
    ],
    "deployments": [
        ("Name", "string", 0, _name),
        (
            "Ready",
            "string",
            0,
            lambda d: f"{_int(d, 'status', 'readyReplicas')}/{_spec_replicas(d)}",
        ),
        ("Up-to-date", "integer", 0, lambda d: _int(d, "status", "updatedReplicas")),
        ("Available", "integer", 0, lambda d: _int(d, "status", "availableReplicas")),
        ("Age", "string", 0, _age),
        *_WORKLOAD_WIDE,
    ],
    "replicasets": [
        ("Name", "string", 0, _name),
        ("Desired", "integer", 0, _spec_replicas),
        ("Current", "integer", 0, lambda r: _int(r, "status", "replicas")),
        ("Ready", "integer", 0, lambda r: _int(r, "status", "readyReplicas")),
        ("Age", "string", 0, _age),
        *_WORKLOAD_WIDE,
    ],
    "pods": [
        ("Name", "string", 0, _name),
        ("Ready", "string", 0, _pod_ready),
        ("Status", "string", 0, _pod_status),
        ("Restarts", "integer", 0, _pod_restarts),
        ("Age", "string", 0, _age),
        ("IP", "string", 1, lambda p: (p.get("status") or {}).get("podIP") or "<none>"),
        ("Node", "string", 1, lambda p: (p.get("spec") or {}).get("nodeName") or "<none>"),
    ],
    "nodes": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, _node_status),
        ("Roles", "string", 0, _node_roles),
        ("Age", "string", 0, _age),
        ("Version", "string", 0, lambda n: json_path(n, ".status.nodeInfo.kubeletVersion") or ""),
    ],
    "services": [
        ("Name", "string", 0, _name),
        ("Type", "string", 0, lambda s: (s.get("spec") or {}).get("type", "ClusterIP")),
        ("Cluster-IP", "string", 0, lambda s: (s.get("spec") or {}).get("clusterIP") or "<none>"),
        ("External-IP", "string", 0, lambda s: "<none>"),
        ("Port(s)", "string", 0, _service_ports),
        ("Age", "string", 0, _age),
    ],
    "namespaces": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, lambda n: (n.get("status") or {}).get("phase", "")),
        ("Age", "string", 0, _age),
    ],
    "resourcequotas": [
        ("Name", "string", 0, _name),
        ("Age", "string", 0, _age),
        ("Request", "string", 0, _quota_column(False)),
        ("Limit", "string", 0, _quota_column(True)),
    ],
    "limitranges": [
        ("Name", "string", 0, _name),
        ("Created At", "date", 0, lambda o: o["metadata"].get("creationTimestamp") or ""),
    ],
    "leases": [
        ("Name", "string", 0, _name),
        ("Holder", "string", 0, lambda x: json_path(x, ".spec.holderIdentity") or ""),
        ("Age", "string", 0, _age),
    ],
    "poddisruptionbudgets": [
        ("Name", "string", 0, _name),
        ("Min Available", "string", 0, lambda b: _budget_bound(b, "minAvailable")),
        ("Max Unavailable", "string", 0, lambda b: _budget_bound(b, "maxUnavailable")),
        ("Allowed Disruptions", "integer", 0, lambda b: _int(b, "status", "disruptionsAllowed")),
        ("Age", "string", 0, _age),
    ],
    "events": [
        ("Last Seen", "string", 0, _event_last_seen),
        ("Type", "string", 0, lambda e: e.get("type", "")),
        ("Reason", "string", 0, lambda e: e.get("reason", "")),
        ("Object", "string", 0, _event_object),
        ("Message", "string", 0, lambda e: e.get("message") or e.get("note") or ""),
        ("Name", "string", 1, _name),
    ],
}


def _columns(rt: ResourceType) -> list[Column]:
    if rt.builtin and rt.plural in _BUILTIN:
        return _BUILTIN[rt.plural]
    columns: list[Column] = [("Name", "string", 0, _name)]
    for col in rt.printer_columns:
        kind, path = col.get("type", "string"), col.get("jsonPath", "")

        def cell(obj: Obj, kind: str = kind, path: str = path) -> Any:
            value = json_path(obj, path)
            return age(value) if kind == "date" and isinstance(value, str) else value

        printed = "string" if kind == "date" else kind
        columns.append((col.get("name", ""), printed, int(col.get("priority", 0)), cell))
    if not any(
        str(c.get("name", "")).lower() == "age"
        or c.get("jsonPath") == ".metadata.creationTimestamp"
        for c in rt.printer_columns
    ):
        columns.append(("Age", "string", 0, _age))
    return columns


def table(
    rt: ResourceType, objs: list[Obj], rv: int, token: str | None, query: Mapping[str, str]
) -> dict[str, Any]:
    columns = _columns(rt)
    definitions = [
        {"name": name, "type": kind, "format": "name" if name == "Name" else "", "priority": prio}
        for name, kind, prio, _ in columns
    ]
    include = query.get("includeObject", "Metadata")
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": [cell(obj) for _, _, _, cell in columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
