"""What `dev --watch` shows: every slice with its state and the Ray node of each host.

The dev cluster knows no Ray and no slices; this view groups pods by the labels the operator
sets (cluster, group, replica index, host index), so a slice is seen as one unit: creating,
ready, broken (and why), deleting. On a terminal it redraws in place (rich's Live display);
otherwise each change is appended, so a log file reads as a history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

RayColumn = Callable[[Mapping[str, Any], str], str]
#: What `ray start` prints once the node is up (head and workers alike).
RAY_STARTED = b"Ray runtime started"


def ray_state(log: bytes | None, phase: str) -> str:
    """The RAY column: whether the pod's `ray start` is up, from its first container's output
    (None: the pod runs nowhere here, so there is nothing to tell)."""
    if log is None or phase not in ("Pending", "Running"):
        return ""
    return "up" if RAY_STARTED in log else "starting"


@dataclass(frozen=True)
class HostRow:
    cluster: str
    slice: str
    state: str
    host: str
    pod: str
    node: str
    phase: str
    ready: str
    ray: str


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _phase(pod: Mapping[str, Any]) -> str:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _ready(pod: Mapping[str, Any]) -> tuple[int, int]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return sum(1 for s in statuses if s.get("ready")), total


def _why(pod: Mapping[str, Any]) -> str:
    """A failed host's reason: its container's termination or waiting reason."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        state = status.get("state") or {}
        if "terminated" in state:
            done = state["terminated"]
            return f"{done.get('reason') or 'exited'} {done.get('exitCode', '')}".strip()
        if (state.get("waiting") or {}).get("reason") in ("CrashLoopBackOff", "StartError"):
            return str(state["waiting"]["reason"])
    return str((pod.get("status") or {}).get("reason") or _phase(pod))


def slice_state(hosts: list[Mapping[str, Any]]) -> str:
    """creating, ready, broken (why), deleting: one word for the slice as a unit."""
    phases = [_phase(p) for p in hosts]
    if all(phase == "Terminating" for phase in phases):
        return "deleting"
    for pod, phase in zip(hosts, phases, strict=True):
        host = _labels(pod).get("ray.io/replica-host-index", "?")
        if phase in ("Failed", "Terminating") or _why(pod) in ("CrashLoopBackOff", "StartError"):
            return f"broken: host {host} {_why(pod)}"
    ready = sum(1 for p in hosts if _phase(p) == "Running" and _ready(p)[0] == _ready(p)[1])
    if ready == len(hosts):
        return "ready"
    return f"creating ({ready}/{len(hosts)} hosts ready)"


def _number(value: str) -> tuple[int, int | str]:
    return (0, int(value)) if value.isdigit() else (1, value)


def host_rows(pods: Iterable[Mapping[str, Any]], ray: RayColumn | None = None) -> list[HostRow]:
    """One row per pod, slices together in index order, the slice's state on each row."""
    units: dict[tuple[str, str, str, str], list[Mapping[str, Any]]] = {}
    for pod in pods:
        labels = _labels(pod)
        meta = pod.get("metadata") or {}
        cluster = labels.get("ray.io/cluster", "")
        group = labels.get("ray.io/group", "")
        replica = labels.get("ray.io/worker-group-replica-index", "")
        key = (str(meta.get("namespace", "")), cluster, group, replica)
        if not cluster:
            key = (*key[:3], str(meta.get("name", "")))
        units.setdefault(key, []).append(pod)
    rows = []
    for key in sorted(units, key=lambda k: (k[0], k[1], k[2] != "headgroup", k[2], _number(k[3]))):
        _, cluster, group, replica = key
        hosts = sorted(
            units[key], key=lambda p: _number(_labels(p).get("ray.io/replica-host-index", ""))
        )
        state = slice_state(hosts)
        name = "head" if group == "headgroup" else (f"{group}-{replica}" if cluster else "")
        for pod in hosts:
            meta = pod.get("metadata") or {}
            phase = _phase(pod)
            done, total = _ready(pod)
            rows.append(
                HostRow(
                    cluster=cluster or "-",
                    slice=name or "-",
                    state=state,
                    host=_labels(pod).get("ray.io/replica-host-index", ""),
                    pod=str(meta.get("name", "")),
                    node=str((pod.get("spec") or {}).get("nodeName") or "<none>"),
                    phase=phase,
                    ready=f"{done}/{total}",
                    ray=ray(pod, phase) if ray else "",
                )
            )
    return rows


_STYLES = {"ready": "green", "deleting": "magenta"}


def _style(state: str) -> str:
    if state.startswith("broken"):
        return "bold red"
    if state.startswith("creating"):
        return "yellow"
    return _STYLES.get(state, "")


def render(rows: list[HostRow], footer: list[str], *, ray: bool) -> RenderableType:
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns = ["CLUSTER", "SLICE", "STATE", "HOST", "POD", "NODE", "PHASE", "READY"]
    for column in [*columns, *(["RAY"] if ray else [])]:
        table.add_column(column, no_wrap=True)
    last = None
    for row in rows:
        unit = (row.cluster, row.slice)
        first = unit != last
        last = unit
        cells: list[RenderableType] = [
            row.cluster if first else "",
            row.slice if first else "",
            Text(row.state if first else "", style=_style(row.state)),
            row.host,
            row.pod,
            row.node,
            row.phase,
            row.ready,
            *([row.ray] if ray else []),
        ]
        table.add_row(*cells)
    return Group(table, Text(""), *(Text(line, style="dim") for line in footer))


def next_commands(kubeconfig: str, rows: list[HostRow], *, real: bool = True) -> list[str]:
    """What to try next, with this cluster's names filled in (`real`: pods are processes)."""
    cluster = next((r.cluster for r in rows if r.slice == "head"), "<cluster>")
    start = f"export KUBECONFIG={kubeconfig} PATH=$PWD/.venv/bin:$PATH"
    if not real:
        return [
            start,
            "kubectl get rayclusters,pods -L ray.io/group,ray.io/worker-group-replica-index",
            "pods are simulated here: exec, port-forward and Ray need `--runtime process`",
            "Ctrl-C stops the dev cluster",
        ]
    return [
        start,
        "kubectl exec $(kubectl get pod -l ray.io/node-type=head -o name) -- ray status",
        f"kubectl port-forward svc/{cluster}-head-svc 8265:8265 &   # http://localhost:8265",
        "ray job submit --address http://localhost:8265 -- python -c 'import ray; ray.init(); "
        "print(ray.nodes())'",
        "Ctrl-C stops the dev cluster and removes everything it made",
    ]
