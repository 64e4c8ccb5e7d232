"""Container environment as a kubelet builds it: ordered, with `$(VAR)` references.

Kubernetes expands `$(NAME)` in env values, command and args against the variables defined
before it (never the image's or the host's environment); `$$` is an escaped dollar and a
reference to an unknown name, or a malformed one, is left exactly as written. Pods rely on
this (KubeRay's `FQ_RAY_IP` is built from `$(RAY_IP)`), so the process runtime must match it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from devkube.process.downward import (
    DownwardContext,
    field_ref_value,
    resource_field_value,
)


def expand(text: str, defined: Mapping[str, str]) -> str:
    """Expand `$(NAME)` references in `text` with Kubernetes' rules."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                # Malformed: the rest is kept verbatim.
                out.append(text[i:])
                break
            name = text[i + 2 : close]
            if name and name in defined:
                out.append(defined[name])
            else:
                out.append(text[i : close + 1])
            i = close + 1
        else:
            out.append(ch)
            out.append(nxt)
            i += 2
    return "".join(out)


def expand_all(items: Sequence[str], defined: Mapping[str, str]) -> list[str]:
    """Expand every command or args item against the container's final environment."""
    return [expand(item, defined) for item in items]


# A lookup for configMapKeyRef / secretKeyRef: (kind, name, key) -> value or None when missing.
KeyLookup = Callable[[str, str, str], str | None]


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    ctx: DownwardContext,
    *,
    service_env: Mapping[str, str] | None = None,
    lookup: KeyLookup | None = None,
) -> dict[str, str]:
    """The variables a kubelet would put in this container, in definition order.

    `service_env` (the KUBERNETES_SERVICE_* variables) comes first, then `envFrom` sources, then
    `env` entries, each later one overriding earlier ones, as Kubernetes does. Raises ValueError
    for a reference that cannot be resolved (a real kubelet refuses to start the container).
    """
    env: dict[str, str] = dict(service_env or {})
    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        for kind, ref_key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            ref = source.get(ref_key)
            if ref is None:
                continue
            values = _whole_source(lookup, kind, str(ref.get("name", "")))
            if values is None and not ref.get("optional"):
                raise ValueError(f"{kind} {ref.get('name')!r} not found")
            for key, value in (values or {}).items():
                env[prefix + key] = value
    for entry in container.get("env") or []:
        name = str(entry["name"])
        if "value" in entry or "valueFrom" not in entry:
            env[name] = expand(str(entry.get("value") or ""), env)
            continue
        resolved = _value_from(pod, container, entry["valueFrom"], ctx, lookup)
        if resolved is not None:
            env[name] = resolved
    return env


def _whole_source(lookup: KeyLookup | None, kind: str, name: str) -> dict[str, str] | None:
    # envFrom needs every key: the lookup answers key "" with the data as `k=v` lines.
    if lookup is None:
        return None
    raw = lookup(kind, name, "")
    if raw is None:
        return None
    pairs = (line.split("=", 1) for line in raw.splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def _value_from(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    source: Mapping[str, Any],
    ctx: DownwardContext,
    lookup: KeyLookup | None,
) -> str | None:
    if "fieldRef" in source:
        return field_ref_value(pod, str(source["fieldRef"]["fieldPath"]), ctx)
    if "resourceFieldRef" in source:
        ref = source["resourceFieldRef"]
        target = container
        if ref.get("containerName"):
            target = _container_named(pod, str(ref["containerName"]))
        return resource_field_value(
            target, str(ref["resource"]), ref.get("divisor"), ctx.allocatable
        )
    for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
        ref = source.get(key)
        if ref is None:
            continue
        value = lookup(kind, str(ref["name"]), str(ref["key"])) if lookup else None
        if value is None and not ref.get("optional"):
            raise ValueError(f"{kind} {ref['name']!r} key {ref['key']!r} not found")
        return value
    raise ValueError(f"unsupported valueFrom: {sorted(source)}")


def _container_named(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    spec = pod.get("spec") or {}
    for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if c.get("name") == name:
            return dict(c)
    raise ValueError(f"no container named {name!r}")
