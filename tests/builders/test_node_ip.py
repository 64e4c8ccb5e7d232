"""Every Ray node announces its pod IP (downward API), unless the user chose an address.

Ray otherwise picks its address by routing, which is right only when every pod has its own
network; where pods share one (the dev cluster's process runtime, hostNetwork pods), all nodes
would claim the same address.
"""

from __future__ import annotations

import importlib
import shlex
from typing import Any

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod

from .conftest import cluster_dict, env_of, make_cluster, worker_pod


def ray_scripts() -> Any:
    """Ray's CLI, imported when a test runs, not at collection: it pulls in Ray's dashboard
    and Serve (~4 s), which every pytest-xdist worker would pay to collect this file."""
    return importlib.import_module("ray.scripts.scripts")


POD_IP_REF = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}


def _pods(cluster_obj: dict[str, object] | None = None) -> list[dict[str, object]]:
    cluster = load_cluster(cluster_obj) if cluster_obj else make_cluster()
    tpu, cpu = cluster.spec.worker_group_specs[:2]
    return [
        build_head_pod(cluster),
        worker_pod(cluster, tpu, host=1, replica_name="tpu-bcd2f"),
        worker_pod(cluster, cpu),
    ]


def _node_ip(pod: dict[str, object]) -> str:
    argv = shlex.split(env_of(pod)["KUBERAY_GEN_RAY_START_CMD"])
    params = ray_scripts().start.make_context("start", argv[2:]).params
    return str(params["node_ip_address"])


def test_every_ray_node_announces_its_pod_ip() -> None:
    for pod in _pods():
        env = env_of(pod)
        assert env["MY_POD_IP"] == POD_IP_REF
        assert _node_ip(pod) == "$MY_POD_IP"
        # The generated command runs under bash, which expands the variable.
        (line,) = pod["spec"]["containers"][0]["args"]  # type: ignore[index]
        assert "--node-ip-address=$MY_POD_IP" in line


def test_a_user_node_ip_address_and_pod_ip_variable_are_kept() -> None:
    obj = cluster_dict()
    obj["spec"]["headGroupSpec"]["rayStartParams"] = {"node-ip-address": "10.0.0.9"}
    for group in obj["spec"]["workerGroupSpecs"]:
        group["rayStartParams"] = {"node-ip-address": "$MY_POD_IP"}
        container = group["template"]["spec"]["containers"][0]
        container["env"] = [{"name": "MY_POD_IP", "value": "10.1.1.1"}]
    head, *workers = _pods(obj)
    assert _node_ip(head) == "10.0.0.9"
    for pod in workers:
        assert _node_ip(pod) == "$MY_POD_IP"
        names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]  # type: ignore[index]
        assert names.count("MY_POD_IP") == 1
        assert env_of(pod)["MY_POD_IP"] == "10.1.1.1"
