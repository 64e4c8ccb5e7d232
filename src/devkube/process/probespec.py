"""Probes as data: what to check, when, and how results turn into a verdict.

A kubelet counts consecutive results against success/failure thresholds before flipping a
container's readiness or restarting it; keeping that arithmetic pure lets it be tested
without timers or sockets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ProbeKind = Literal["exec", "http", "tcp", "grpc"]


@dataclass(frozen=True)
class ProbeSpec:
    kind: ProbeKind
    command: tuple[str, ...] = ()
    host: str = ""
    port: int = 0
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3


def resolve_port(port: object, container_ports: Sequence[Mapping[str, Any]]) -> int:
    """A probe port is a number or the name of one of the container's ports."""
    if isinstance(port, int) and not isinstance(port, bool):
        return port
    text = str(port)
    if text.isdigit():
        return int(text)
    for p in container_ports:
        if p.get("name") == text:
            return int(p["containerPort"])
    raise ValueError(f"probe port {text!r} names no container port")


def parse_probe(probe: Mapping[str, Any] | None, container: Mapping[str, Any]) -> ProbeSpec | None:
    """Turn a container's probe object into a ProbeSpec (None when absent)."""
    if not probe:
        return None
    ports = container.get("ports") or []
    return dataclasses.replace(
        _handler(probe, ports),
        initial_delay=float(probe.get("initialDelaySeconds") or 0),
        period=float(probe.get("periodSeconds") or 10),
        timeout=float(probe.get("timeoutSeconds") or 1),
        success_threshold=int(probe.get("successThreshold") or 1),
        failure_threshold=int(probe.get("failureThreshold") or 3),
    )


def _handler(probe: Mapping[str, Any], ports: Sequence[Mapping[str, Any]]) -> ProbeSpec:
    if "exec" in probe:
        command = tuple(str(c) for c in (probe["exec"].get("command") or []))
        return ProbeSpec(kind="exec", command=command)
    if "httpGet" in probe:
        get = probe["httpGet"]
        headers = tuple(
            (str(h["name"]), str(h.get("value", ""))) for h in get.get("httpHeaders") or []
        )
        return ProbeSpec(
            kind="http",
            host=str(get.get("host") or ""),
            port=resolve_port(get.get("port"), ports),
            path=str(get.get("path") or "/"),
            scheme=str(get.get("scheme") or "HTTP").upper(),
            headers=headers,
        )
    if "tcpSocket" in probe:
        sock = probe["tcpSocket"]
        return ProbeSpec(
            kind="tcp",
            host=str(sock.get("host") or ""),
            port=resolve_port(sock.get("port"), ports),
        )
    if "grpc" in probe:
        # No gRPC health client here: treated as a TCP connect to the port.
        return ProbeSpec(kind="grpc", port=int(probe["grpc"]["port"]))
    raise ValueError(f"unsupported probe handler: {sorted(probe)}")


@dataclass(frozen=True)
class ProbeState:
    """Consecutive results so far and the current verdict."""

    passing: bool
    successes: int = 0
    failures: int = 0


def record(spec: ProbeSpec, state: ProbeState, ok: bool) -> ProbeState:
    """Fold one probe result into the state; the verdict flips only at a threshold."""
    if ok:
        successes = state.successes + 1
        passing = state.passing or successes >= spec.success_threshold
        return ProbeState(passing=passing, successes=successes, failures=0)
    failures = state.failures + 1
    passing = state.passing and failures < spec.failure_threshold
    return ProbeState(passing=passing, successes=0, failures=failures)
