"""Cluster DNS, written down: the /etc/hosts a pod sees in the process runtime.

There is no DNS server on the dev cluster, so each pod gets a hosts file holding the names
cluster DNS would answer: services (`svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`) and
the per-pod records of headless services (`hostname.subdomain...`). Built from plain data so
the runtime can rewrite it whenever pods or services change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

HEADER = "# Kubernetes-managed hosts file (dev cluster process runtime).\n"
LOCAL = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


@dataclass(frozen=True)
class PodRecord:
    """What name resolution needs to know about one pod."""

    namespace: str
    name: str
    ip: str
    labels: Mapping[str, str] = field(default_factory=dict)
    hostname: str = ""
    subdomain: str = ""
    ready: bool = False
    terminating: bool = False

    @property
    def host(self) -> str:
        """The pod's hostname: `spec.hostname`, else its name (as a kubelet sets it)."""
        return self.hostname or self.name


def pod_record(pod: Mapping[str, Any], ip: str | None = None) -> PodRecord:
    """Extract a PodRecord from a pod object; `ip` overrides `status.podIP`."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return PodRecord(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        ip=ip if ip is not None else str(status.get("podIP") or ""),
        labels=dict(meta.get("labels") or {}),
        hostname=str(spec.get("hostname") or ""),
        subdomain=str(spec.get("subdomain") or ""),
        ready=ready,
        terminating=bool(meta.get("deletionTimestamp")),
    )


def _names(first: str, namespace: str, own_namespace: str, domain: str) -> list[str]:
    # `first` is `svc` or `host.subdomain`; the short forms resolve only through the search path
    # of the pod's own namespace.
    names = [
        f"{first}.{namespace}",
        f"{first}.{namespace}.svc",
        f"{first}.{namespace}.svc.{domain}",
    ]
    if namespace == own_namespace:
        names.insert(0, first)
    return names


def _selects(service: Mapping[str, Any], pod: PodRecord) -> bool:
    meta = service.get("metadata") or {}
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector or pod.namespace != (meta.get("namespace") or "default"):
        return False
    return all(pod.labels.get(k) == v for k, v in selector.items())


def endpoints(service: Mapping[str, Any], pods: Sequence[PodRecord]) -> list[PodRecord]:
    """The pods a service routes to, ordered by name: ready ones, or all live ones when
    `publishNotReadyAddresses` is set."""
    spec = service.get("spec") or {}
    not_ready_too = bool(spec.get("publishNotReadyAddresses"))
    chosen = [
        p
        for p in pods
        if p.ip and not p.terminating and (p.ready or not_ready_too) and _selects(service, p)
    ]
    return sorted(chosen, key=lambda p: p.name)


def hosts_file(
    me: PodRecord,
    pods: Sequence[PodRecord],
    services: Sequence[Mapping[str, Any]],
    *,
    domain: str = "cluster.local",
) -> str:
    """The whole /etc/hosts for pod `me`.

    A ClusterIP service resolves to its first endpoint (there is no proxy: the pod's own port
    is reached, so service ports should equal target ports); a headless service resolves to
    every endpoint and gives each endpoint with a matching `subdomain` its `hostname.subdomain`
    names.
    """
    lines = [HEADER, LOCAL]
    if me.ip:
        if me.subdomain:
            fqdn = f"{me.host}.{me.subdomain}.{me.namespace}.svc.{domain}"
            lines.append(f"{me.ip}\t{fqdn}\t{me.host}\n")
        else:
            lines.append(f"{me.ip}\t{me.host}\n")
    ordered = sorted(
        services,
        key=lambda s: ((s.get("metadata") or {}).get("namespace", ""), s["metadata"]["name"]),
    )
    for service in ordered:
        meta = service.get("metadata") or {}
        spec = service.get("spec") or {}
        name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "default")
        if spec.get("type") == "ExternalName" or not name:
            continue
        backends = endpoints(service, pods)
        if not backends:
            continue
        svc_names = " ".join(_names(name, namespace, me.namespace, domain))
        headless = spec.get("clusterIP") == "None"
        for pod in backends if headless else backends[:1]:
            lines.append(f"{pod.ip}\t{svc_names}\n")
        if headless:
            for pod in backends:
                if pod.subdomain == name and pod.hostname:
                    names = _names(f"{pod.hostname}.{name}", namespace, me.namespace, domain)
                    lines.append(f"{pod.ip}\t{' '.join(names)}\n")
    return "".join(lines)
