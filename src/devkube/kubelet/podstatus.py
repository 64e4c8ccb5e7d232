"""What a kubelet would report for a pod, as a pure function of its containers' states.

The kubelet keeps a `PodRecord` per pod it runs; every change of a container (started, ready,
exited, restarted) is applied to the record, and `render_status` turns the record into the
`.status` the API shows: phase by the restart policy, conditions, containerStatuses in
container order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kubefacts.qos import pod_qos

State = Literal["waiting", "running", "terminated"]


@dataclass
class ContainerRecord:
    name: str
    image: str = ""
    state: State = "waiting"
    reason: str = "ContainerCreating"
    ready: bool = False
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    message: str = ""
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None

    def terminated(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at or None,
            "finishedAt": self.finished_at,
            "containerID": self.container_id(),
        }
        if self.message:
            body["message"] = self.message
        return body

    def container_id(self) -> str:
        return f"devcluster://{self.name}-{self.restart_count}"


@dataclass
class PodRecord:
    namespace: str
    name: str
    uid: str
    node: str
    host_ip: str
    pod_ip: str
    restart_policy: str
    start_time: str
    scheduled_at: str
    containers: list[ContainerRecord]
    init_containers: list[str] = field(default_factory=list)
    # Set when the pod as a whole is finished by something other than its containers
    # (its node was lost): phase Failed with this reason, whatever the containers say.
    failed_reason: str = ""
    failed_message: str = ""
    # The runtime would not make the pod's sandbox (reason, message): its containers never
    # start, and PodReadyToStartContainers says why.
    sandbox_refused: tuple[str, str] | None = None
    node_ready: bool = True
    qos_class: str = "BestEffort"
    # The pod annotation `dev.raycluster-operator.io/ready=false`: every container's readiness
    # probe fails (the containers keep running), as a real failing probe looks.
    probe_failing: bool = False

    def container(self, name: str | None) -> list[ContainerRecord]:
        if name is None:
            return list(self.containers)
        return [c for c in self.containers if c.name == name]


def qos_class(pod_spec: Mapping[str, Any]) -> str:
    """The API server's rule (`kubefacts.qos`): one implementation for both."""
    return pod_qos(pod_spec)


def pod_phase(record: PodRecord) -> str:
    if record.failed_reason:
        return "Failed"
    states = [c.state for c in record.containers]
    if all(s == "waiting" for s in states) and not any(c.restart_count for c in record.containers):
        return "Pending"
    if all(s == "terminated" for s in states):
        failed = any(c.exit_code != 0 for c in record.containers)
        if record.restart_policy == "Never":
            return "Failed" if failed else "Succeeded"
        if record.restart_policy == "OnFailure" and not failed:
            return "Succeeded"
    return "Running"


def _sandbox_condition(record: PodRecord) -> dict[str, Any]:
    if record.sandbox_refused is None:
        return _condition("PodReadyToStartContainers", True, record.start_time)
    reason, message = record.sandbox_refused
    condition = _condition("PodReadyToStartContainers", False, record.start_time, reason)
    condition["message"] = message
    return condition


def _condition(kind: str, ok: bool, since: str, reason: str = "") -> dict[str, Any]:
    condition: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": since,
    }
    if reason and not ok:
        condition["reason"] = reason
    return condition


def _container_status(record: PodRecord, c: ContainerRecord) -> dict[str, Any]:
    if c.state == "running":
        state: dict[str, Any] = {"running": {"startedAt": c.started_at}}
    elif c.state == "terminated":
        state = {"terminated": c.terminated()}
    else:
        state = {"waiting": {"reason": c.reason}}
        if c.message:
            state["waiting"]["message"] = c.message
    status: dict[str, Any] = {
        "name": c.name,
        "image": c.image,
        "imageID": f"devcluster://{c.image}" if c.image else "",
        "ready": c.ready
        and record.node_ready
        and c.state == "running"
        and not record.probe_failing,
        "started": c.state == "running",
        "restartCount": c.restart_count,
        "state": state,
        "lastState": {"terminated": c.last_terminated} if c.last_terminated else {},
    }
    if c.state != "waiting":
        status["containerID"] = c.container_id()
    return status


def render_status(record: PodRecord, since: str) -> dict[str, Any]:
    """The pod's `.status`; `since` stamps condition transitions (the caller keeps it stable
    while nothing changes, so repeated renders are equal)."""
    phase = pod_phase(record)
    statuses = [_container_status(record, c) for c in record.containers]
    containers_ready = phase == "Running" and all(s["ready"] for s in statuses)
    not_ready = "PodFailed" if phase in ("Failed", "Succeeded") else "ContainersNotReady"
    status: dict[str, Any] = {
        "phase": phase,
        "hostIP": record.host_ip,
        "hostIPs": [{"ip": record.host_ip}],
        "podIP": record.pod_ip,
        "podIPs": [{"ip": record.pod_ip}],
        "startTime": record.start_time,
        "qosClass": record.qos_class,
        "conditions": [
            _sandbox_condition(record),
            _condition("Initialized", True, record.start_time),
            _condition("Ready", containers_ready, since, not_ready),
            _condition("ContainersReady", containers_ready, since, not_ready),
            _condition("PodScheduled", True, record.scheduled_at),
        ],
        "containerStatuses": statuses,
        "reason": record.failed_reason or None,
        "message": record.failed_message or None,
    }
    if record.init_containers:
        status["initContainerStatuses"] = [
            {
                "name": name,
                "ready": True,
                "started": False,
                "restartCount": 0,
                "image": "",
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": record.start_time,
                        "finishedAt": record.start_time,
                    }
                },
                "lastState": {},
            }
            for name in record.init_containers
        ]
    return status
