"""Pods of a cluster a RayService created (docs/design.md §12): KubeRay v1.7's ``ray.io/serve``
labels, Serve proxy readiness on single-host workers and serving env, plus ours: a multi-host
slice's hosts start out of the serve service, with a plain worker's readiness."""

from __future__ import annotations

from typing import Any

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod, build_worker_pod

from .conftest import cluster_dict, env_of

RAYLET = "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"


def _pods(origin: str | None) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    obj = cluster_dict(rayVersion="2.60.0")
    if origin:
        obj["metadata"]["labels"] = {"ray.io/originated-from-crd": origin}
    cpu = obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    cpu["ports"] = [{"name": "serve", "containerPort": 9000}]
    obj["spec"]["workerGroupSpecs"][1]["template"]["metadata"] = {"labels": {"ray.io/serve": "x"}}
    cluster = load_cluster(obj)
    tpu, single = cluster.spec.worker_group_specs
    sliced = build_worker_pod(cluster, tpu, replica_index=0, replica_name="tpu-abcde", host_index=1)
    host = build_worker_pod(cluster, single, replica_index=0, replica_name=None, host_index=None)
    return build_head_pod(cluster), sliced, host


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = pod["metadata"]["labels"]
    return found


def test_serve_labels_head_out_single_host_in_slice_hosts_out_until_whole() -> None:
    head, sliced, host = _pods("RayService")
    assert _labels(head)["ray.io/serve"] == "false"
    assert _labels(host)["ray.io/serve"] == "true"  # over the template's value, as KubeRay
    assert _labels(sliced)["ray.io/serve"] == "false"


def test_single_host_worker_readiness_checks_the_serve_proxy_and_fails_at_once() -> None:
    head, sliced, host = _pods("RayService")
    proxy = "wget --tries 1 -T 10 -q -O- http://localhost:9000/-/healthz | grep success"
    readiness = host["spec"]["containers"][0]["readinessProbe"]
    assert readiness["exec"]["command"] == ["bash", "-c", f"{RAYLET} && {proxy}"]
    assert "httpGet" not in readiness and readiness["failureThreshold"] == 1
    # A host of a multi-host slice may hold no replica, hence no proxy: its readiness is a
    # RayCluster worker's (the raylet), and the controller asks its proxy (RS4).
    sliced_readiness = sliced["spec"]["containers"][0]["readinessProbe"]
    assert sliced_readiness["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert "exec" not in sliced_readiness and sliced_readiness["failureThreshold"] == 10
    # The head's proxy is the controller's to check; its probe is a RayCluster head's.
    assert head["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/api/healthz"
    for pod in (head, sliced, host):
        env = env_of(pod)
        assert env["RAY_TIMEOUT_MS_TASK_WAIT_FOR_DEATH_INFO"] == "0"
        assert env["RAY_SERVE_KV_TIMEOUT_S"] == env["RAY_GCS_SERVER_REQUEST_TIMEOUT_SECONDS"] == "5"


def test_other_clusters_are_untouched() -> None:
    for origin in (None, "RayJob"):
        head, sliced, host = _pods(origin)
        assert "ray.io/serve" not in _labels(head) and "ray.io/serve" not in _labels(sliced)
        assert _labels(host)["ray.io/serve"] == "x"
        readiness = host["spec"]["containers"][0]["readinessProbe"]
        assert readiness["httpGet"]["path"] == "/api/healthz"
        assert "RAY_SERVE_KV_TIMEOUT_S" not in env_of(host)
