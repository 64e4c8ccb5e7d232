"""The plain pod table: one row per pod, ordered as slices (group, replica, host), for a log
or a script where the live view's boxes would not read well."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from raycluster_operator.api.objects import Pod

TABLE_LABELS = (
    ("GROUP", "ray.io/group"),
    ("REPLICA", "ray.io/worker-group-replica-index"),
    ("HOST", "ray.io/replica-host-index"),
)


def _ready(pod: Pod) -> str:
    ready = sum(1 for s in pod.container_statuses if s.get("ready"))
    return f"{ready}/{len(pod.containers)}"


def _index(value: str) -> tuple[int, int | str]:
    """Numeric labels sort as numbers (10 after 9); absent ones sort last."""
    if value.isdigit():
        return (0, int(value))
    return (1, value)


def pod_table(
    pods: Iterable[Mapping[str, Any]],
    ray: Callable[[Mapping[str, Any], str], str] | None = None,
) -> str:
    """The dev cluster itself knows no Ray; the table shows the labels the operator sets, so the
    hosts of one slice stand together and a replaced slice is seen coming back at its index.
    With ``ray`` (pod, phase -> text) a RAY column tells whether each pod's Ray node is up.
    """
    header: tuple[str, ...] = ("NAMESPACE", *(t for t, _ in TABLE_LABELS), "POD", "NODE")
    header += ("PHASE", "READY") + (("RAY",) if ray else ())
    keyed: list[tuple[tuple[Any, ...], tuple[str, ...]]] = []
    for body in pods:
        pod = Pod(body)
        phase = "Terminating" if pod.deleting else pod.phase or "Pending"
        group, replica, host = (str(pod.labels.get(key, "")) for _, key in TABLE_LABELS)
        namespace, name = pod.namespace or "", pod.name
        row = (
            namespace,
            group,
            replica,
            host,
            name,
            pod.node_name or "<none>",
            phase,
            _ready(pod),
            *((ray(body, phase),) if ray else ()),
        )
        keyed.append(((namespace, group, _index(replica), _index(host), name), row))
    rows = [header, *(row for _, row in sorted(keyed))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
