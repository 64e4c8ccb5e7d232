"""Pod status from what the runtime observed of its containers, as a kubelet reports it.

Kept pure (the clock comes in as a string) so the phase and condition rules can be tested
on their own: operators, Ray's autoscaler and kubectl all read exactly these fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

StateKind = Literal["waiting", "running", "terminated"]


@dataclass(frozen=True)
class ContainerView:
    """One container as last observed."""

    name: str
    image: str = ""
    state: StateKind = "waiting"
    reason: str = "ContainerCreating"
    message: str = ""
    exit_code: int = 0
    signal: int = 0
    started_at: str = ""
    finished_at: str = ""
    restart_count: int = 0
    ready: bool = False
    started: bool = False
    # Terminated and never to run again (restart policy says so).
    final: bool = False
    last_terminated: Mapping[str, Any] | None = None
    container_id: str = ""


def terminated_reason(exit_code: int) -> str:
    return "Completed" if exit_code == 0 else "Error"


def container_status(view: ContainerView) -> dict[str, Any]:
    """The `containerStatuses[]` entry for a view."""
    state: dict[str, Any]
    if view.state == "running":
        state = {"running": {"startedAt": view.started_at}}
    elif view.state == "terminated":
        state = {"terminated": terminated_state(view)}
    else:
        waiting: dict[str, Any] = {"reason": view.reason}
        if view.message:
            waiting["message"] = view.message
        state = {"waiting": waiting}
    out: dict[str, Any] = {
        "name": view.name,
        "image": view.image,
        "imageID": "",
        "ready": view.ready,
        "started": view.started,
        "restartCount": view.restart_count,
        "state": state,
        "lastState": {"terminated": dict(view.last_terminated)} if view.last_terminated else {},
    }
    if view.container_id:
        out["containerID"] = view.container_id
    return out


def terminated_state(view: ContainerView) -> dict[str, Any]:
    term: dict[str, Any] = {
        "exitCode": view.exit_code,
        "reason": view.reason or terminated_reason(view.exit_code),
        "startedAt": view.started_at,
        "finishedAt": view.finished_at,
    }
    if view.signal:
        term["signal"] = view.signal
    if view.message:
        term["message"] = view.message
    if view.container_id:
        term["containerID"] = view.container_id
    return term


def pod_phase(init: Sequence[ContainerView], containers: Sequence[ContainerView]) -> str:
    """Pending until init containers are done and a container ran; Succeeded/Failed only when
    every container has stopped for good."""
    if any(c.final and c.exit_code != 0 for c in init):
        return "Failed"
    if not all(c.state == "terminated" and c.exit_code == 0 for c in init):
        return "Pending"
    if containers and all(c.final for c in containers):
        return "Succeeded" if all(c.exit_code == 0 for c in containers) else "Failed"
    if any(c.state == "running" or c.restart_count or c.state == "terminated" for c in containers):
        return "Running"
    return "Pending"


@dataclass(frozen=True)
class PodFacts:
    """The kubelet-side facts that are not container states."""

    pod_ip: str
    host_ip: str
    start_time: str
    previous_conditions: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def pod_status(
    facts: PodFacts,
    init: Sequence[ContainerView],
    containers: Sequence[ContainerView],
    *,
    now: str,
) -> dict[str, Any]:
    """The whole `.status` of a pod. Conditions keep their transition time while unchanged."""
    phase = pod_phase(init, containers)
    initialized = all(c.state == "terminated" and c.exit_code == 0 for c in init)
    ready = bool(containers) and all(c.ready for c in containers) and phase == "Running"
    wanted = {
        "PodScheduled": True,
        "Initialized": initialized,
        "ContainersReady": ready,
        "Ready": ready,
    }
    before = {c.get("type"): c for c in facts.previous_conditions}
    conditions = []
    for kind, ok in wanted.items():
        value = "True" if ok else "False"
        old = before.get(kind)
        stamp = old.get("lastTransitionTime") if old and old.get("status") == value else now
        conditions.append({"type": kind, "status": value, "lastTransitionTime": stamp})
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": facts.host_ip,
        "hostIPs": [{"ip": facts.host_ip}],
        "startTime": facts.start_time,
        "containerStatuses": [container_status(c) for c in containers],
    }
    if facts.pod_ip:
        status["podIP"] = facts.pod_ip
        status["podIPs"] = [{"ip": facts.pod_ip}]
    if init:
        status["initContainerStatuses"] = [container_status(c) for c in init]
    return status


def restarts(policy: str, exit_code: int) -> bool:
    """Whether a container that exited with `exit_code` runs again under `policy`."""
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return exit_code != 0
    return True
