"""Defaults the real server fills in on create, which clients read back and rely on."""

from __future__ import annotations

import json
from typing import Any

from kubefacts.limitrange import requests_from_limits
from kubefacts.objects import Obj
from kubefacts.qos import pod_qos


class ClusterIPs:
    """Allocates service cluster IPs from 10.96.0.0/16, like a default cluster's range."""

    def __init__(self) -> None:
        self._next = 10

    def default_service(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("type") != "ExternalName":
            if not spec.get("clusterIP"):
                n = self._next
                self._next += 1
                spec["clusterIP"] = f"10.96.{n // 256}.{n % 256}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            if "targetPort" not in port and "port" in port:
                port["targetPort"] = port["port"]
        obj["status"] = {"loadBalancer": {}}


def deployment(obj: Obj) -> None:
    """apps/v1 Deployment defaults, as ``kubectl get deploy -o yaml`` shows them (the strategy
    only when none is given: a Recreate one carries no rollingUpdate)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("progressDeadlineSeconds", 600)
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "strategy",
        {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    )


def mutable_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec with the fields a pod update may change blanked out."""
    frozen: dict[str, Any] = json.loads(json.dumps(spec))
    for key in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"):
        frozen.pop(key, None)
    for group in ("containers", "initContainers"):
        for container in frozen.get(group) or []:
            container.pop("image", None)
    return frozen


def pod_status(pod: Obj) -> None:
    """What the pod strategy's PrepareForCreate writes: after mutating admission, so the
    QoS class reads the requests and limits LimitRanger defaulted (docs/design.md §8,
    "Pod defaults before admission")."""
    pod["status"] = {"phase": "Pending", "qosClass": pod_qos(pod.get("spec") or {})}


def pod(obj: Obj) -> None:
    """SetDefaults_Pod and friends, as the API server applies them when it decodes a pod:
    before admission, so a container with only limits requests them (a `requests.cpu`
    quota admits it, a GPU set only in `limits` is charged)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        image = str(container.get("image", ""))
        tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
        latest = tagless or image.endswith(":latest")
        container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
        for port in container.get("ports") or []:
            port.setdefault("protocol", "TCP")
    requests_from_limits(spec)
    obj["status"] = {"phase": "Pending"}
