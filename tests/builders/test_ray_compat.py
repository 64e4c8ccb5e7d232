"""What we build, read by Ray's own code from the installed ``ray`` package.

The env of host 2 of slice 1 of a v6e 4x4 group goes through Ray's TPU accelerator manager,
which turns it into the node labels Ray schedules TPU slices by; our ray start command lines
go through Ray's own click parser.
"""

from __future__ import annotations

import importlib
import json
import shlex
from typing import Any

import pytest

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod
from tpu_topologies import GKE, TABLE

from .conftest import cluster_dict, env_of, make_cluster, worker_pod

tpu_module = pytest.importorskip("ray._private.accelerators.tpu")


def ray_scripts() -> Any:
    """Ray's CLI, imported when a test runs, not at collection: it pulls in Ray's dashboard
    and Serve (~4 s), which every pytest-xdist worker would pay to collect this file."""
    return importlib.import_module("ray.scripts.scripts")


label_utils = pytest.importorskip("ray._private.label_utils")

CLUSTER = make_cluster(enableInTreeAutoscaling=True)
TPU = CLUSTER.spec.worker_group_specs[0]


def host_env(replica: int, host: int) -> dict[str, Any]:
    pod = worker_pod(CLUSTER, TPU, replica=replica, host=host, replica_name="tpu-bcd2f")
    return env_of(pod)


@pytest.fixture
def tpu_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    env = host_env(replica=1, host=2)
    for key in ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY"):
        monkeypatch.setenv(key, env[key])

    def no_metadata_server(key: str) -> None:
        raise AssertionError(f"Ray fell back to the GCE metadata server for {key}")

    monkeypatch.setattr(tpu_module, "_get_tpu_metadata", no_metadata_server)
    return env


def test_ray_derives_the_slice_name_and_worker_id(tpu_env: dict[str, Any]) -> None:
    manager = tpu_module.TPUAcceleratorManager
    labels = manager.get_current_node_accelerator_labels()
    assert labels["ray.io/tpu-slice-name"] == "tpu-1"
    assert labels["ray.io/tpu-worker-id"] == "2"
    assert labels["ray.io/tpu-topology"] == "4x4"
    assert labels["ray.io/tpu-pod-type"] == "v6e-16"
    assert manager.get_current_node_accelerator_type() == "TPU-V6E"
    # The slice resource every host of the slice shares; only worker 0 gets the head resource.
    assert manager.get_current_node_additional_resources() == {"tpu-1": 1}


def test_only_host_zero_is_the_slice_head(monkeypatch: pytest.MonkeyPatch) -> None:
    env = host_env(replica=1, host=0)
    for key in ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY"):
        monkeypatch.setenv(key, env[key])
    resources = tpu_module.TPUAcceleratorManager.get_current_node_additional_resources()
    assert resources == {"tpu-1": 1, "TPU-v6e-16-head": 1}


def test_our_pod_type_and_topology_are_valid_for_ray() -> None:
    env = host_env(0, 0)
    manager = tpu_module.TPUAcceleratorManager
    assert manager.is_valid_tpu_accelerator_type(env["TPU_ACCELERATOR_TYPE"])
    assert manager.is_valid_tpu_accelerator_topology("v6e", env["TPU_TOPOLOGY"])
    assert tpu_module.get_num_chips_from_topology(env["TPU_TOPOLOGY"]) == 16


def parse_start(line: str) -> dict[str, Any]:
    argv = shlex.split(line)
    assert argv[:2] == ["ray", "start"]
    ctx = ray_scripts().start.make_context("start", argv[2:])
    return dict(ctx.params)


def test_rays_cli_accepts_our_worker_command() -> None:
    params = parse_start(host_env(1, 2)["KUBERAY_GEN_RAY_START_CMD"])
    assert params["address"] == "demo-head-svc.ml.svc.cluster.local:6379"
    assert params["block"] is True
    assert params["num_cpus"] == 8
    assert params["metrics_export_port"] == 8080
    assert params["dashboard_agent_listen_port"] == 52365
    assert json.loads(params["resources"]) == {"TPU": 4}


def test_rays_cli_accepts_our_head_command() -> None:
    head = build_head_pod(CLUSTER)
    params = parse_start(env_of(head)["KUBERAY_GEN_RAY_START_CMD"])
    assert params["head"] is True
    assert params["no_monitor"] is True
    assert params["dashboard_host"] == "0.0.0.0"


def test_rays_cli_accepts_our_autoscaler_sidecar() -> None:
    """The sidecar runs our corrected entry point with exactly the arguments of
    ``ray kuberay-autoscaler`` (design rule 7b)."""
    side = build_head_pod(CLUSTER)["spec"]["containers"][1]
    assert side["command"][:2] == ["python", "-c"]
    assert "run_kuberay_autoscaler" in side["command"][2]
    command = ray_scripts().cli.commands["kuberay-autoscaler"]
    ctx = command.make_context("kuberay-autoscaler", list(side["args"]))
    assert ctx.params["cluster_name"] == "demo"
    assert ctx.params["cluster_namespace"] == "ml"


def test_every_ray_start_switch_set_true_is_a_bare_flag() -> None:
    from raycluster_operator.builders.ray_start import ray_start_command

    switches = [o.name.replace("_", "-") for o in ray_scripts().start.params if o.is_flag]
    switches.remove("head")
    line = ray_start_command(dict.fromkeys(switches, "true"), head=False)
    params = parse_start(line)
    assert all(params[s.replace("-", "_")] is True for s in switches)
    assert ray_start_command(dict.fromkeys(switches, "false"), head=False) == "ray start"
    assert "--include-dashboard=false" in ray_start_command(
        {"include-dashboard": "false"}, head=True
    )


def test_options_taking_a_boolean_value_reach_ray_when_false() -> None:
    """KubeRay passes these three as ``--k=false``; Ray's own parser must then read False."""
    from raycluster_operator.builders.ray_start import ray_start_command

    for option in ("include-dashboard", "log-color", "include-log-monitor"):
        line = ray_start_command({option: "false"}, head=True)
        assert f"--{option}=false" in line
    params = parse_start(ray_start_command({"include-log-monitor": "false"}, head=True))
    assert params["include_log_monitor"] in (False, "false", "False")


def test_ray_reads_the_gpu_domain_label_we_pass() -> None:
    obj = cluster_dict()
    group = obj["spec"]["workerGroupSpecs"][1]
    group.update(numOfHosts=2, rayStartParams={"labels": "team=a"})
    group["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, 1, replica=3, host=0, replica_name="cpu-x")
    params = parse_start(env_of(pod)["KUBERAY_GEN_RAY_START_CMD"])
    labels = label_utils.parse_node_labels_string(params["labels"])
    # The slice's ComputeDomain name, <cluster>-<replica name> (rule 13b).
    assert labels == {"ray.io/gpu-domain": "demo-cpu-x", "team": "a"}


@pytest.mark.parametrize(("gen", "topology", "chips", "hosts"), TABLE)
def test_ray_counts_as_many_hosts_per_slice_as_we_create(
    monkeypatch: pytest.MonkeyPatch, gen: str, topology: str, chips: int, hosts: int
) -> None:
    obj = cluster_dict()
    group = obj["spec"]["workerGroupSpecs"][0]
    group["numOfHosts"] = hosts
    spec = group["template"]["spec"]
    spec["nodeSelector"] = {
        "cloud.google.com/gke-tpu-accelerator": GKE[gen],
        "cloud.google.com/gke-tpu-topology": topology,
    }
    for kind in ("limits", "requests"):
        spec["containers"][0]["resources"][kind]["google.com/tpu"] = str(chips)
    cluster = load_cluster(obj)
    multi = hosts > 1
    pod = worker_pod(cluster, host=0 if multi else None, replica_name="tpu-x")
    env = env_of(pod)
    for key in ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY"):
        monkeypatch.setenv(key, env[key])
    manager = tpu_module.TPUAcceleratorManager
    monkeypatch.setattr(manager, "get_current_node_num_accelerators", staticmethod(lambda: chips))
    assert manager.get_num_workers_in_current_tpu_pod() == hosts
    assert manager.get_current_node_accelerator_labels()["ray.io/tpu-topology"] == topology
