"""The ``ray start`` command line, built from rayStartParams and the container's resources.

KubeRay's rules, kept so a cluster behaves the same under either operator: parameters are
sorted ``--key=value`` flags (``block: "true"`` is the bare ``--block``); ``num-cpus``,
``memory`` and ``num-gpus`` come from the container's limits (requests when no limit) unless
the user set them; a ``google.com/tpu`` limit becomes ``--resources='{"TPU": n}'``; defaults
fill ports the user did not choose.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from raycluster_operator.api.quantities import container_limit_or_request, parse_quantity

GCS_PORT = 6379
DASHBOARD_PORT = 8265
CLIENT_PORT = 10001
METRICS_PORT = 8080
DASHBOARD_AGENT_PORT = 52365
ULIMIT = "ulimit -n 65536"
TPU_RESOURCE = "google.com/tpu"
#: ``ray start`` options that take no value: ``"true"`` gives the bare flag, anything else
#: drops it (``--no-monitor=true`` would be a usage error).
FLAGS = frozenset(
    {
        "block",
        "disable-usage-stats",
        "enable-object-reconstruction",
        "enable-resource-isolation",
        "no-monitor",
        "no-redirect-output",
        "ray-debugger-external",
    }
)


def _gpus(container: Mapping[str, Any]) -> Fraction:
    """KubeRay counts every limit whose name ends in ``gpu`` (nvidia.com/gpu, amd.com/gpu)."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    if not isinstance(limits, Mapping):
        return Fraction(0)
    total = Fraction(0)
    for name, value in limits.items():
        if str(name).endswith("gpu"):
            try:
                total += parse_quantity(value)
            except ValueError:
                continue
    return total


def _json_param(text: str) -> dict[str, Any] | None:
    """rayStartParams carry JSON in strings, often quoted once more for the shell
    (``'"{\\"TPU\\": 4}"'``); read it leniently, None when it is not a JSON object."""
    value: Any = text.strip()
    for _ in range(3):
        if not isinstance(value, str):
            break
        raw = value.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] == "'":
            raw = raw[1:-1]
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


def start_params(
    user: Mapping[str, str],
    container: Mapping[str, Any],
    defaults: Mapping[str, str],
    *,
    ray_labels: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """rayStartParams completed with defaults, resource sizes and extra Ray node labels."""
    params = {**defaults, **{str(k): str(v) for k, v in user.items()}}
    cpus = container_limit_or_request(container, "cpu")
    if "num-cpus" not in params and cpus:
        params["num-cpus"] = str(math.ceil(cpus))
    memory = container_limit_or_request(container, "memory")
    if "memory" not in params and memory:
        params["memory"] = str(math.ceil(memory))
    gpus = _gpus(container)
    if "num-gpus" not in params and gpus:
        params["num-gpus"] = str(math.ceil(gpus))
    tpus = container_limit_or_request(container, TPU_RESOURCE)
    if tpus:
        resources = _json_param(params.get("resources", "{}"))
        if resources is not None and "TPU" not in resources:
            resources["TPU"] = math.ceil(tpus)
            params["resources"] = json.dumps(resources, sort_keys=True, separators=(",", ":"))
    if ray_labels:
        current = _labels_param(params.get("labels", ""))
        merged = {**ray_labels, **current}
        params["labels"] = ",".join(f"{k}={v}" for k, v in merged.items())
    return params


def _flag(key: str, value: str) -> str:
    if key in FLAGS:
        return f"--{key}" if value.lower() == "true" else ""
    if key == "resources":
        resources = _json_param(value)
        if resources is not None:
            value = json.dumps(resources, sort_keys=True, separators=(",", ":"))
        return f"--resources={shlex.quote(value)}"
    return f"--{key}={shlex.quote(value)}"


def ray_start_command(params: Mapping[str, str], *, head: bool) -> str:
    """``ray start [--head] --k=v ...`` with flags in sorted order."""
    flags = [f for f in (_flag(k, params[k]) for k in sorted(params)) if f]
    return " ".join(["ray start", *(["--head"] if head else []), *flags])


def container_command(container: Mapping[str, Any], start: str) -> tuple[list[str], list[str]]:
    """Command and args of the Ray container: the user's own command (if any) runs first, then
    ``ray start``; ``ulimit`` is added unless the user already raises it."""
    user_parts = [
        " ".join(str(p) for p in part)
        for part in (container.get("command"), container.get("args"))
        if isinstance(part, list) and part
    ]
    user = " ".join(user_parts)
    line = f"{user} && {start}" if user else start
    if ULIMIT not in user:
        line = f"{ULIMIT}; {line}"
    return ["/bin/bash", "-c", "--"], [line]
