"""KubeRay/webhook parity in what is built: the serve service and TPU v7x pods with several
TPU containers. The same objects are proven through the dev cluster with kubectl in
tests/operator/test_parity_serve_and_env.py."""

from __future__ import annotations

import copy
from typing import Any

from raycluster_operator.accelerators import validate_cluster
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import (
    build_head_pod,
    build_serve_service,
    needs_serve_service,
)

from .conftest import cluster_dict, env_of, tpu_worker_group, worker_pod

SERVE = {"ray.io/enable-serve-service": "true"}


def annotated(**spec: Any) -> Any:
    obj = cluster_dict(**spec)
    obj["metadata"]["annotations"] = dict(SERVE)
    return load_cluster(obj)


def test_serve_service_has_kuberays_name_labels_and_only_the_serve_port() -> None:
    cluster = annotated()
    assert needs_serve_service(cluster)
    assert not needs_serve_service(load_cluster(cluster_dict()))
    svc = build_serve_service(cluster)
    assert svc["metadata"]["name"] == "demo-serve-svc"
    assert svc["metadata"]["namespace"] == "ml"
    labels = svc["metadata"]["labels"]
    assert labels["ray.io/originated-from-cr-name"] == "demo"
    assert labels["ray.io/originated-from-crd"] == "RayCluster"
    assert labels["ray.io/serve"] == "demo-serve"
    assert svc["spec"]["selector"] == {"ray.io/cluster": "demo", "ray.io/serve": "true"}
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 8000}]
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"


def test_serve_port_follows_the_head_containers_port_named_serve() -> None:
    obj = cluster_dict()
    obj["metadata"]["annotations"] = dict(SERVE)
    head = obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [
        {"name": "serve", "containerPort": 9000},
        {"name": "gcs", "containerPort": 6379},
    ]
    svc = build_serve_service(load_cluster(obj))
    assert svc["spec"]["ports"] == [{"name": "serve", "port": 9000}]


def test_pods_of_a_serving_cluster_are_labelled_unless_the_template_says_no() -> None:
    cluster = annotated()
    cpu = cluster.spec.worker_group_specs[1]
    assert build_head_pod(cluster)["metadata"]["labels"]["ray.io/serve"] == "true"
    worker = worker_pod(cluster, cpu)
    assert worker["metadata"]["labels"]["ray.io/serve"] == "true"
    plain = load_cluster(cluster_dict())
    assert "ray.io/serve" not in build_head_pod(plain)["metadata"]["labels"]
    obj = cluster_dict()
    obj["metadata"]["annotations"] = dict(SERVE)
    obj["spec"]["headGroupSpec"]["template"]["metadata"] = {"labels": {"ray.io/serve": "false"}}
    assert build_head_pod(load_cluster(obj))["metadata"]["labels"]["ray.io/serve"] == "false"


def v7x_cluster(containers: int) -> Any:
    group = tpu_worker_group(numOfHosts=4)
    spec = group["template"]["spec"]
    spec["nodeSelector"] = {
        "cloud.google.com/gke-tpu-accelerator": "tpu7x",
        "cloud.google.com/gke-tpu-topology": "2x2x4",
    }
    first = spec["containers"][0]
    chips = str(4 // containers)  # a v7x host has 4 chips, split over the containers
    first["resources"] = {
        "limits": {"google.com/tpu": chips},
        "requests": {"google.com/tpu": chips},
    }
    for c in range(1, containers):
        extra = copy.deepcopy(first)
        extra["name"] = f"tpu-{c}"
        spec["containers"].append(extra)
    spec["containers"].append({"name": "sidecar", "image": "busybox"})
    return load_cluster(cluster_dict(workerGroupSpecs=[group]))


def test_a_v7x_pod_with_two_tpu_containers_gets_two_tpu_workers() -> None:
    cluster = v7x_cluster(2)
    assert validate_cluster(cluster) == []
    group = cluster.spec.worker_group_specs[0]
    pod = worker_pod(cluster, group, host=1, replica_name="tpu-bcd2f")
    ray, second, sidecar = (env_of(pod, i) for i in range(3))
    assert (ray["TPU_WORKER_ID"], second["TPU_WORKER_ID"]) == ("2", "3")
    assert (ray["TPU_PROCESS_PORT"], second["TPU_PROCESS_PORT"]) == ("8476", "8477")
    addresses = ray["TPU_PROCESS_ADDRESSES"].split(",")
    assert len(addresses) == 8 and addresses[0] == "tpu-0-0.demo-headless:8476"
    assert second["TPU_NAME"] == ray["TPU_NAME"] == "tpu-0"
    assert second["TPU_DEVICE_PLUGIN_ADDR"] == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112"
    # A container without TPU chips gets no TPU identity.
    assert "TPU_WORKER_ID" not in sidecar
    # Ray itself runs in the first container only.
    assert "RAY_ADDRESS" in ray and "RAY_ADDRESS" not in second
