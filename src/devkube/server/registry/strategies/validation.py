"""Field validation the real server applies to every object, and a few pod/service rules.

Only rules an operator can plausibly break are kept: label syntax (keys and values over 63
characters are a classic generated-name bug), owner references, DNS names of hostnames and
subdomains, and the shape of pod containers and service ports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

Cause = tuple[str, str]


def _qualified_name(key: str, field: str) -> list[Cause]:
    prefix, _, name = key.rpartition("/")
    causes: list[Cause] = []
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        causes.append((field, f'Invalid value: "{key}": prefix part must be a DNS subdomain'))
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        causes.append(
            (
                field,
                f'Invalid value: "{key}": name part must consist of alphanumeric characters, '
                "'-', '_' or '.', must start and end with an alphanumeric character and be "
                "no more than 63 characters",
            )
        )
    return causes


def metadata_causes(meta: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        return [("metadata.labels", "Invalid value: must be a map of strings")]
    for key, value in labels.items():
        causes += _qualified_name(str(key), "metadata.labels")
        if not isinstance(value, str):
            causes.append((f"metadata.labels[{key}]", "Invalid value: must be a string"))
        elif value and (len(value) > 63 or not _LABEL_NAME.match(value)):
            causes.append(
                (
                    "metadata.labels",
                    f'Invalid value: "{value}": a valid label must be an empty string or consist '
                    "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                    "alphanumeric character (63 characters at most)",
                )
            )
    annotations = meta.get("annotations") or {}
    if isinstance(annotations, Mapping):
        for key, value in annotations.items():
            causes += _qualified_name(str(key), "metadata.annotations")
            if not isinstance(value, str):
                causes.append((f"metadata.annotations[{key}]", "Invalid value: must be a string"))
    owners = meta.get("ownerReferences") or []
    controllers = 0
    for i, ref in enumerate(owners if isinstance(owners, list) else []):
        for required in ("apiVersion", "kind", "name", "uid"):
            if not (isinstance(ref, Mapping) and ref.get(required)):
                causes.append((f"metadata.ownerReferences[{i}].{required}", "Required value"))
        if isinstance(ref, Mapping) and ref.get("controller"):
            controllers += 1
    if controllers > 1:
        causes.append(
            (
                "metadata.ownerReferences",
                "Invalid value: Only one reference can have Controller set to true",
            )
        )
    return causes


def _dns_label_field(spec: Mapping[str, Any], key: str, path: str) -> list[Cause]:
    value = spec.get(key)
    if value and (not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value)):
        return [
            (
                f"{path}.{key}",
                f'Invalid value: "{value}": a lowercase RFC 1123 label (63 characters at most)',
            )
        ]
    return []


def pod_causes(pod: Mapping[str, Any]) -> list[Cause]:
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return [("spec", "Required value")]
    causes: list[Cause] = []
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.containers", "Required value"))
        containers = []
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, Mapping)}
    seen: set[str] = set()
    for group in ("initContainers", "containers"):
        items = containers if group == "containers" else spec.get(group) or []
        for i, container in enumerate(items):
            path = f"spec.{group}[{i}]"
            if not isinstance(container, Mapping):
                causes.append((path, "Invalid value: must be an object"))
                continue
            name = container.get("name")
            if not name:
                causes.append((f"{path}.name", "Required value"))
            elif not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.match(name):
                causes.append(
                    (f"{path}.name", f'Invalid value: "{name}": a lowercase RFC 1123 label')
                )
            elif name in seen:
                causes.append((f"{path}.name", f'Duplicate value: "{name}"'))
            else:
                seen.add(name)
            if not container.get("image"):
                causes.append((f"{path}.image", "Required value"))
            for j, port in enumerate(container.get("ports") or []):
                number = port.get("containerPort") if isinstance(port, Mapping) else None
                if not isinstance(number, int) or not 0 < number < 65536:
                    causes.append(
                        (
                            f"{path}.ports[{j}].containerPort",
                            "Invalid value: must be between 1 and 65535",
                        )
                    )
            for j, mount in enumerate(container.get("volumeMounts") or []):
                if isinstance(mount, Mapping) and mount.get("name") not in volumes:
                    causes.append(
                        (f"{path}.volumeMounts[{j}].name", f'Not found: "{mount.get("name")}"')
                    )
    causes += _dns_label_field(spec, "hostname", "spec")
    causes += _dns_label_field(spec, "subdomain", "spec")
    return causes


def service_causes(service: Mapping[str, Any]) -> list[Cause]:
    spec = service.get("spec") or {}
    causes: list[Cause] = []
    ports = spec.get("ports") or []
    names = [p.get("name") for p in ports if isinstance(p, Mapping)]
    for i, port in enumerate(ports):
        number = port.get("port") if isinstance(port, Mapping) else None
        if not isinstance(number, int) or not 0 < number < 65536:
            causes.append((f"spec.ports[{i}].port", "Invalid value: must be between 1 and 65535"))
        if len(ports) > 1 and isinstance(port, Mapping) and not port.get("name"):
            causes.append((f"spec.ports[{i}].name", "Required value"))
    if len([n for n in names if n]) != len({n for n in names if n}):
        causes.append(("spec.ports", "Duplicate value: port names must be unique"))
    if (
        not ports
        and spec.get("type", "ClusterIP") != "ExternalName"
        and spec.get("clusterIP") != "None"
    ):
        causes.append(("spec.ports", "Required value"))
    return causes
