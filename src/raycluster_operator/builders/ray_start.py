"""The ``ray start`` command line, built from rayStartParams and the container's resources.

KubeRay's rules, kept so a cluster behaves the same under either operator:

- defaults fill what the user left out (``address`` for workers, ``dashboard-host=0.0.0.0``
  for the head, ``metrics-export-port=8080``, ``dashboard-agent-listen-port=52365``), and
  ``block`` is always on;
- ``num-cpus`` comes from the cpu limit (else request), rounded up; ``memory`` from the memory
  limit in bytes; ``num-gpus`` from the first (sorted) limit whose name ends in ``gpu`` (or a
  MIG profile); a ``google.com/tpu`` (or Neuron core) limit becomes a ``TPU`` entry of
  ``--resources='{...}'`` unless the user already counts it;
- flags are sorted ``--key=value`` (values passed through unquoted, so ``$VARS`` expand); a
  value of ``true``/``false`` is a bare switch (present or absent), except for options whose
  argument is literally a boolean (``include-dashboard``, ``log-color``,
  ``include-log-monitor``: KubeRay's list).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from raycluster_operator.api.quantities import (
    container_limit_or_request,
    container_quantity,
    parse_quantity,
)

GCS_PORT = 6379
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
METRICS_PORT = 8080
SERVE_PORT = 8000
DASHBOARD_AGENT_PORT = 52365
#: KubeRay's (v1.7) open-files raise, with its RAY_START_ULIMIT_OPEN_FILES knob. Where the
#: hard limit is lower and the container may not raise it (no CAP_SYS_RESOURCE: the dev
#: cluster's process runtime, some sandboxed runtimes), the soft limit goes up to the hard one
#: instead of printing ``cannot modify limit`` at the top of every pod's log
#: (docs/design.md, §3.4).
ULIMIT = (
    'ulimit -n "${RAY_START_ULIMIT_OPEN_FILES:-65536}" 2>/dev/null || ulimit -n "$(ulimit -Hn)"'
)
#: Kubernetes extended resources that become Ray custom resources.
ACCELERATOR_RESOURCES = {"google.com/tpu": "TPU", "aws.amazon.com/neuroncore": "neuron_cores"}
#: Options whose argument may itself be ``true``/``false``.
_BOOLEAN_ARGUMENT_OPTIONS = frozenset({"include-dashboard", "log-color", "include-log-monitor"})
_MIG = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")


def _limits(container: Mapping[str, Any]) -> Mapping[str, Any]:
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    return limits if isinstance(limits, Mapping) else {}


def _is_gpu(name: str) -> bool:
    return name.endswith("gpu") or _MIG.search(name) is not None


def _json_param(text: str) -> dict[str, Any] | None:
    """Read a JSON object from a rayStartParams string, which users often wrap in quotes for
    the shell (``'{"TPU": 4}'`` or ``"{\\"TPU\\": 4}"``); None when it is not one."""
    value: Any = text
    for _ in range(3):
        if not isinstance(value, str):
            break
        raw = value.strip().strip("'`").strip()
        try:
            value = json.loads(raw)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _labels_param(text: str) -> dict[str, str]:
    raw = text.strip().strip("'\"")
    out: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        key, _, value = pair.partition("=")
        out[key.strip()] = value.strip()
    return out


def _count(value: object) -> int:
    """A Kubernetes quantity as KubeRay's ``Value()``: rounded up to a whole number."""
    return math.ceil(parse_quantity(value))


def start_params(
    user: Mapping[str, str],
    container: Mapping[str, Any],
    defaults: Mapping[str, str],
    *,
    ray_labels: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """rayStartParams completed with defaults, resource sizes and the host's Ray node labels
    (``ray_labels``, which override the user's labels of the same keys)."""
    params = {**defaults, **{str(k): str(v) for k, v in user.items()}, "block": "true"}
    cpus = container_limit_or_request(container, "cpu")
    if "num-cpus" not in params and cpus:
        params["num-cpus"] = str(math.ceil(cpus))
    memory = container_quantity(container, "memory", kind="limits")
    if "memory" not in params and memory:
        params["memory"] = str(math.ceil(memory))
    limits = _limits(container)
    for name in sorted(str(k) for k in limits):
        try:
            amount = _count(limits[name])
        except ValueError:
            continue
        if amount and "num-gpus" not in params and _is_gpu(name):
            params["num-gpus"] = str(amount)
    _add_accelerator_resources(params, limits)
    if ray_labels:
        # The host's own labels win: they are its identity (docs/design.md, rule 3.4a).
        current = _labels_param(params.get("labels", ""))
        merged = {**ray_labels, **{k: v for k, v in current.items() if k not in ray_labels}}
        params["labels"] = ",".join(f"{k}={v}" for k, v in merged.items())
    return params


def _add_accelerator_resources(params: dict[str, str], limits: Mapping[str, Any]) -> None:
    """The first accelerator limit (sorted) becomes a Ray resource, unless one is counted."""
    resources = _json_param(params["resources"]) if "resources" in params else {}
    if resources is None or any(r in resources for r in ACCELERATOR_RESOURCES.values()):
        return
    for name in sorted(str(k) for k in limits):
        ray_name = ACCELERATOR_RESOURCES.get(name)
        if ray_name is None:
            continue
        try:
            amount = parse_quantity(limits[name])
        except ValueError:
            continue
        if amount:
            resources[ray_name] = int(amount) if amount.denominator == 1 else float(amount)
            params["resources"] = "'" + json.dumps(resources, separators=(",", ":")) + "'"
            return


def _flag(key: str, value: str) -> str:
    if value.lower() in ("true", "false") and key not in _BOOLEAN_ARGUMENT_OPTIONS:
        return f"--{key}" if value.lower() == "true" else ""
    return f"--{key}={value}"


def ray_start_command(params: Mapping[str, str], *, head: bool) -> str:
    """``ray start [--head] --k=v ...`` with flags in sorted order."""
    flags = [f for f in (_flag(k, params[k]) for k in sorted(params)) if f]
    return " ".join(["ray start", *(["--head"] if head else []), *flags])


def user_command(container: Mapping[str, Any]) -> str:
    """The container's own command and args as one shell line."""
    parts = [
        str(p)
        for field in ("command", "args")
        if isinstance(container.get(field), list)
        for p in container[field]
    ]
    return " ".join(parts)


def container_command(container: Mapping[str, Any], start: str) -> tuple[list[str], list[str]]:
    """Command and args of the Ray container: the user's own command (if any) runs first,
    since ``ray start --block`` never returns, then ``ulimit`` and ``ray start``."""
    generated = f"{ULIMIT}; {start}"
    user = user_command(container)
    return ["/bin/bash", "-c", "--"], [f"{user} && {generated}" if user else generated]
