from __future__ import annotations

from typing import Any

from raycluster_operator.api.models import WorkerGroupSpec


def make_group(
    *,
    hosts: int = 1,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    node_selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "workers",
) -> WorkerGroupSpec:
    container: dict[str, Any] = {"name": "ray-worker", "image": "rayproject/ray:2.60.0"}
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    if resources:
        container["resources"] = resources
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    template: dict[str, Any] = {"spec": spec}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return WorkerGroupSpec.model_validate(
        {"groupName": name, "numOfHosts": hosts, "template": template}
    )


def tpu_group(accelerator: str, topology: str, chips: int, hosts: int) -> WorkerGroupSpec:
    return make_group(
        hosts=hosts,
        limits={"google.com/tpu": str(chips)},
        requests={"google.com/tpu": str(chips)},
        node_selector={
            "cloud.google.com/gke-tpu-accelerator": accelerator,
            "cloud.google.com/gke-tpu-topology": topology,
        },
    )
