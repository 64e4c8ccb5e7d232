"""Legacy (non-aggregated) discovery documents, built from the live registry.

Clients that ask for aggregated discovery (apidiscovery.k8s.io/v2) fall back to these when the
answer's content type is plain JSON, which keeps one code path for built-in kinds and CRDs.
"""

from __future__ import annotations

from typing import Any

from devkube.server.registry.resources import Registry, ResourceType

KUBE_VERSION = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "gitVersion": "v1.37.0-devcluster",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUB_DOCS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    # subresource: (group, version, kind, verbs); empty group/version = same as parent
    "status": ("", "", "", ("get", "patch", "update")),
    "binding": ("", "", "Binding", ("create",)),
    "eviction": ("policy", "v1", "Eviction", ("create",)),
    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update")),
    "log": ("", "", "Pod", ("get",)),
    "exec": ("", "", "PodExecOptions", ("create", "get")),
    "attach": ("", "", "PodAttachOptions", ("create", "get")),
    "portforward": ("", "", "PodPortForwardOptions", ("create", "get")),
}


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def group_doc(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.versions_of(group)
    if not versions:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def group_list(registry: Registry) -> dict[str, Any]:
    groups = [doc for g in registry.groups() if (doc := group_doc(registry, g)) is not None]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular_name,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in sorted(types, key=lambda t: t.plural):
        resources.append(_resource_entry(rt))
        for sub in sorted(rt.subresources):
            sub_group, sub_version, sub_kind, verbs = _SUB_DOCS[sub]
            entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": sub_kind or rt.kind,
                "verbs": list(verbs),
            }
            if sub_group:
                entry["group"], entry["version"] = sub_group, sub_version
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
