"""What NVIDIA's DRA driver (`dra-driver-nvidia-gpu`) installs for ComputeDomains: the
`computedomains.resource.nvidia.com` CRD (`v1beta1`, namespaced, status subresource) with the
driver's schema, and the two DeviceClasses whose CEL selectors pick its devices. Written from
the structure of the driver's Go types and Helm templates; descriptions are ours."""

from __future__ import annotations

from typing import Any

GROUP = "resource.nvidia.com"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "computedomains"
DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
#: The node label the driver sets to the uid of the ComputeDomain a node serves.
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"
#: Labels of the workload ResourceClaimTemplate the driver makes for a domain.
TARGET_LABEL = "resource.nvidia.com/computeDomainTarget"
#: The driver's finalizer on a ComputeDomain (cleanup before it goes).
FINALIZER = "resource.nvidia.com/computeDomain"


def _string(description: str = "", **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string", **extra}
    if description:
        node["description"] = description
    return node


def _spec_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The nodes a multi-node workload runs on, and its channel claims.",
        "required": ["channel"],
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "A computeDomain.spec is immutable"}
        ],
        "properties": {
            "numNodes": {
                "type": "integer",
                "default": 0,
                "minimum": 0,
                "description": "IMEX daemons (nodes) expected; status turns Ready when this "
                "many nodes have joined. Deprecated by the driver; 0 is its default.",
            },
            "channel": {
                "type": "object",
                "required": ["resourceClaimTemplate"],
                "properties": {
                    "resourceClaimTemplate": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": _string("The template the driver creates.")},
                    },
                    "allocationMode": _string(
                        "One IMEX channel per claim (Single) or every channel (All).",
                        default="Single",
                        enum=["All", "Single"],
                    ),
                },
            },
        },
    }


def _status_schema() -> dict[str, Any]:
    node = {
        "type": "object",
        "required": ["cliqueID", "ipAddress", "name"],
        "properties": {
            "name": _string(),
            "ipAddress": _string(),
            "cliqueID": _string(),
            "index": {"type": "integer"},
            "status": _string(default="NotReady", enum=["Ready", "NotReady"]),
        },
    }
    return {
        "type": "object",
        "description": "For debugging: workloads should not depend on it (the driver's word).",
        "required": ["status"],
        "properties": {
            "status": _string(default="NotReady", enum=["Ready", "NotReady"]),
            "nodes": {
                "type": "array",
                "items": node,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        },
    }


def compute_domain_crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "ComputeDomain",
                "listKind": "ComputeDomainList",
                "plural": PLURAL,
                "singular": "computedomain",
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": _string(),
                                "kind": _string(),
                                "metadata": {"type": "object"},
                                "spec": _spec_schema(),
                                "status": _status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }


def _device_class(name: str, device_type: str, extra: str = "") -> dict[str, Any]:
    expression = (
        f"device.driver == '{DRIVER}' && "
        f"device.attributes['{DRIVER}'].type == '{device_type}'{extra}"
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_classes() -> list[dict[str, Any]]:
    return [
        _device_class(DAEMON_CLASS, "daemon"),
        _device_class(CHANNEL_CLASS, "channel", f" && device.attributes['{DRIVER}'].id == 0"),
    ]
