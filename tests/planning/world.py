"""A tiny, pure stand-in for the API server, kubelet and cache, for planning tests.

Pods are plain dicts as the API returns them. Applying a plan marks deleted pods terminating
(they vanish on the following step, as after a grace period) and adds created pods Running and
Ready with the identity the plan gave them, so a test can re-plan until nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import labels

CLUSTER = "demo"
NAMESPACE = "default"
BASE = datetime(2026, 1, 1, tzinfo=UTC)
#: A deleted pod's deletionTimestamp is the end of its grace period, as the API server sets it.
GRACE_SECONDS = 30


def stamp(seconds: int) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_pod(
    name: str,
    *,
    group: str | None = "workers",
    cluster: str = CLUSTER,
    namespace: str = NAMESPACE,
    node_type: str = "worker",
    replica_index: int | None = None,
    replica_name: str | None = None,
    host_index: int | None = None,
    state: str = "ready",
    created: int = 0,
) -> dict[str, Any]:
    """``state``: ready | pending | failed | succeeded | crashed (ray container ended,
    restartPolicy Never) | terminating."""
    # Every pod the operator makes carries its created-by (one without it is a stray, rule 2b).
    pod_labels = {
        labels.CLUSTER: cluster,
        labels.NODE_TYPE: node_type,
        labels.CREATED_BY: OPERATOR_NAME,
    }
    if group is not None:
        pod_labels[labels.GROUP] = group
    if replica_index is not None:
        pod_labels[labels.REPLICA_INDEX] = str(replica_index)
    if replica_name is not None:
        pod_labels[labels.REPLICA_NAME] = replica_name
    if host_index is not None:
        pod_labels[labels.HOST_INDEX] = str(host_index)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": pod_labels,
        "creationTimestamp": stamp(created),
    }
    phase = {"pending": "Pending", "failed": "Failed", "succeeded": "Succeeded"}.get(
        state, "Running"
    )
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if state == "ready" else "False"}],
        "podIP": "10.0.0.1",
    }
    spec: dict[str, Any] = {"containers": [{"name": "ray-worker", "image": "ray"}]}
    if state == "crashed":
        spec["restartPolicy"] = "Never"
        status["containerStatuses"] = [
            {"name": "ray-worker", "state": {"terminated": {"exitCode": 1}}}
        ]
    if state == "terminating":
        metadata["deletionTimestamp"] = stamp(created + 1)
    return {"metadata": metadata, "spec": spec, "status": status}


@dataclass
class Create:
    group: str
    replica_index: int | None
    replica_name: str | None
    host_index: int | None
    node_type: str = "worker"


@dataclass
class World:
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    clock: int = 1000
    serial: int = 0
    #: Pods a finalizer holds: terminating, they stay until released.
    held: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, pods: Iterable[dict[str, Any]]) -> World:
        return cls({p["metadata"]["name"]: p for p in pods})

    def list(self) -> list[dict[str, Any]]:
        return list(self.pods.values())

    def terminating(self) -> list[str]:
        return [n for n, p in self.pods.items() if p["metadata"].get("deletionTimestamp")]

    def step(
        self,
        deletes: Iterable[str],
        creates: Iterable[Create] = (),
        manifests: Iterable[dict[str, Any]] = (),
    ) -> None:
        """Pods terminating since the last step vanish; deletes start; creates appear.

        ``manifests`` are pods as built for the API: they appear Running and Ready under
        their ``generateName``, with exactly the labels the manifest carries.
        """
        self.clock += 10
        for name in self.terminating():
            if name not in self.held:
                del self.pods[name]
        for manifest in manifests:
            self.serial += 1
            meta = manifest["metadata"]
            name = meta.get("name") or f"{meta['generateName']}{self.serial:05d}"
            pod = make_pod(name, created=self.clock, namespace=meta.get("namespace", NAMESPACE))
            pod["metadata"]["labels"] = dict(meta.get("labels") or {})
            if meta.get("annotations"):
                pod["metadata"]["annotations"] = dict(meta["annotations"])
            pod["spec"] = manifest.get("spec") or pod["spec"]
            self.pods[name] = pod
        for name in deletes:
            pod = self.pods[name]  # a delete of a pod that does not exist is a bug
            assert not pod["metadata"].get("deletionTimestamp"), f"{name} deleted twice"
            pod["metadata"]["deletionTimestamp"] = stamp(self.clock + GRACE_SECONDS)
        for create in creates:
            self.serial += 1
            name = f"{CLUSTER}-{create.group}-worker-new{self.serial}"
            self.pods[name] = make_pod(
                name,
                group=create.group,
                node_type=create.node_type,
                replica_index=create.replica_index,
                replica_name=create.replica_name,
                host_index=create.host_index,
                created=self.clock,
            )


def suffixes(start: int = 0) -> Any:
    """A deterministic ``new_suffix``: distinct 5-character suffixes in KubeRay's alphabet
    (``start`` skips ahead, as a restarted operator draws names it has not drawn before)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    count = start

    def next_suffix() -> str:
        nonlocal count
        count += 1
        n, out = count, []
        for _ in range(5):
            n, r = divmod(n, len(alphabet))
            out.append(alphabet[r])
        return "".join(out)

    return next_suffix
