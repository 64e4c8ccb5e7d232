"""The readiness and liveness probes KubeRay (v1.7) injects into the Ray container.

Without them a pod is Ready as soon as its container starts, seconds before its raylet is up,
so "slice ready", the RayCluster's ``ready`` and a RayJob's submission all come too early
(docs/design.md, rule 3.4c). KubeRay's choices are kept exactly, so a cluster behaves the same
under either operator:

- Ray 2.53 and newer answer one HTTP endpoint, ``/api/healthz`` on the dashboard agent's
  listen port (raylet, and GCS on the head); older Ray, or a ``rayVersion`` that does not
  parse, gets ``wget`` exec checks of the agent's ``api/local_raylet_healthz`` and, on the
  head, the dashboard's ``api/gcs_healthz``;
- the head's timeouts are longer (it checks two things);
- a probe the user wrote is kept, each kind on its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from raycluster_operator.builders import ray_start

#: The first Ray with the agent's unified ``/api/healthz``.
UNIFIED_HEALTH_RAY = (2, 53, 0)
HEALTH_PATH = "/api/healthz"
RAYLET_HEALTH_PATH = "api/local_raylet_healthz"
GCS_HEALTH_PATH = "api/gcs_healthz"
# KubeRay's command, with its arguments: timeout, port, path.
_WGET = "wget --tries 1 -T {} -q -O- http://localhost:{}/{} | grep success"

# KubeRay's numbers (ray-operator/controllers/ray/utils/constant.go).
READINESS_INITIAL_DELAY = 10
READINESS_PERIOD = 5
READINESS_FAILURE_THRESHOLD = 10
LIVENESS_INITIAL_DELAY = 30
LIVENESS_PERIOD = 5
LIVENESS_FAILURE_THRESHOLD = 120
WORKER_TIMEOUT = 2
HEAD_TIMEOUT = 5
#: A RayService worker leaves the endpoints at the first failed proxy check.
SERVE_READINESS_FAILURE_THRESHOLD = 1
SERVE_PROXY_HEALTH_PATH = "-/healthz"
SERVE_PORT_NAME = "serve"
DEFAULT_SERVE_PORT = 8000

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def unified_health(ray_version: str | None) -> bool:
    """Ray answers ``/api/healthz`` (≥ 2.53); an absent or unreadable version does not."""
    match = _VERSION.match((ray_version or "").strip())
    if match is None:
        return False
    major, minor, patch = (int(part or 0) for part in match.groups())
    return (major, minor, patch) >= UNIFIED_HEALTH_RAY


def _port(params: Mapping[str, str], key: str, default: int) -> int:
    value = params.get(key, "")
    return int(value) if value.isdecimal() else default


def _handler(params: Mapping[str, str], *, head: bool, ray_version: str | None) -> dict[str, Any]:
    agent = _port(params, "dashboard-agent-listen-port", ray_start.DASHBOARD_AGENT_PORT)
    if unified_health(ray_version):
        return {"httpGet": {"path": HEALTH_PATH, "port": agent}}
    # KubeRay formats the GCS check's timeout from its readiness failure threshold (10 s):
    # kept, so the command is byte for byte theirs.
    checks = [_WGET.format(WORKER_TIMEOUT, agent, RAYLET_HEALTH_PATH)]
    if head:
        dashboard = _port(params, "dashboard-port", ray_start.DASHBOARD_PORT)
        checks.append(_WGET.format(READINESS_FAILURE_THRESHOLD, dashboard, GCS_HEALTH_PATH))
    return {"exec": {"command": ["bash", "-c", " && ".join(checks)]}}


def serve_port(container: Mapping[str, Any]) -> int:
    """The container's port named ``serve``, else Serve's 8000 (KubeRay's FindContainerPort)."""
    for port in container.get("ports") or []:
        if port.get("name") == SERVE_PORT_NAME and port.get("containerPort"):
            return int(port["containerPort"])
    return DEFAULT_SERVE_PORT


def _serve_readiness(params: Mapping[str, str], port: int) -> dict[str, Any]:
    """A RayService worker's readiness as KubeRay v1.7 writes it, whatever the Ray version:
    the raylet's ``wget`` check and its Serve proxy's ``/-/healthz`` in one exec, failing at
    the first miss, so a worker whose proxy is down leaves the serve service's endpoints."""
    agent = _port(params, "dashboard-agent-listen-port", ray_start.DASHBOARD_AGENT_PORT)
    checks = [
        _WGET.format(WORKER_TIMEOUT, agent, RAYLET_HEALTH_PATH),
        _WGET.format(READINESS_INITIAL_DELAY, port, SERVE_PROXY_HEALTH_PATH),
    ]
    return {"exec": {"command": ["bash", "-c", " && ".join(checks)]}}


def add_probes(
    container: dict[str, Any],
    params: Mapping[str, str],
    *,
    head: bool,
    ray_version: str | None,
    serving: bool = False,
) -> None:
    """Readiness and liveness probes for the Ray container, unless it has its own.
    ``serving``: a single-host worker of a RayService's cluster, whose readiness checks its
    Serve proxy too (the head's proxy, and a multi-host slice's hosts', are the RayService
    controller's to check, docs/design.md §12 RS4)."""
    timeout = HEAD_TIMEOUT if head else WORKER_TIMEOUT
    if not container.get("livenessProbe"):
        container["livenessProbe"] = {
            **_handler(params, head=head, ray_version=ray_version),
            "initialDelaySeconds": LIVENESS_INITIAL_DELAY,
            "timeoutSeconds": timeout,
            "periodSeconds": LIVENESS_PERIOD,
            "successThreshold": 1,
            "failureThreshold": LIVENESS_FAILURE_THRESHOLD,
        }
    if not container.get("readinessProbe"):
        container["readinessProbe"] = {
            **_handler(params, head=head, ray_version=ray_version),
            "initialDelaySeconds": READINESS_INITIAL_DELAY,
            "timeoutSeconds": timeout,
            "periodSeconds": READINESS_PERIOD,
            "successThreshold": 1,
            "failureThreshold": READINESS_FAILURE_THRESHOLD,
        }
        if serving and not head:
            readiness = container["readinessProbe"]
            readiness.pop("httpGet", None)
            readiness.update(_serve_readiness(params, serve_port(container)))
            readiness["failureThreshold"] = SERVE_READINESS_FAILURE_THRESHOLD
