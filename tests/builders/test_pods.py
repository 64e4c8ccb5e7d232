"""Pod manifests: KubeRay labels exactly, ownership, multi-host identity, env and placement."""

from __future__ import annotations

import copy
import os
import resource
import shlex
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raycluster_operator import OPERATOR_NAME
from raycluster_operator.api import names
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod, build_worker_pod
from raycluster_operator.builders.ray_start import ULIMIT

from .conftest import cluster_dict, env_of, make_cluster, tpu_worker_group, worker_pod

CLUSTER = make_cluster()
TPU = CLUSTER.spec.worker_group_specs[0]
CPU = CLUSTER.spec.worker_group_specs[1]
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def tpu_pod(replica: int = 1, host: int = 2, name: str | None = "tpu-bcd2f") -> dict[str, Any]:
    return worker_pod(CLUSTER, TPU, replica=replica, host=host, replica_name=name)


OWNER = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "name": "demo",
    "uid": "uid-1",
    "controller": True,
    "blockOwnerDeletion": True,
}


def test_head_pod_labels_and_ownership() -> None:
    pod = build_head_pod(CLUSTER)
    assert pod["metadata"]["generateName"] == "demo-head-"
    assert pod["metadata"]["namespace"] == "ml"
    assert pod["metadata"]["ownerReferences"] == [OWNER]
    assert pod["metadata"]["labels"] == {
        "ray.io/cluster": "demo",
        "ray.io/group": "headgroup",
        "ray.io/node-type": "head",
        "ray.io/is-ray-node": "yes",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": OPERATOR_NAME,
    }


def test_multi_host_worker_labels() -> None:
    labels = tpu_pod()["metadata"]["labels"]
    assert labels == {
        "ray.io/cluster": "demo",
        "ray.io/group": "tpu",
        "ray.io/node-type": "worker",
        "ray.io/is-ray-node": "yes",
        "ray.io/identifier": "demo-worker",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": OPERATOR_NAME,
        "ray.io/worker-group-replica-index": "1",
        "ray.io/worker-group-replica-name": "tpu-bcd2f",
        "ray.io/replica-host-index": "2",
        "replicaIndex": "tpu-1",
        # Ours: one value per slice in the Kubernetes cluster (exclusive placement, §3.5).
        "ray.io/slice-id": names.slice_id(CLUSTER.metadata.namespace, "demo", "tpu", 1),
        "team": "research",
    }


def test_single_host_worker_has_only_the_replica_index() -> None:
    pod = worker_pod(CLUSTER, CPU)
    labels = pod["metadata"]["labels"]
    assert labels["ray.io/worker-group-replica-index"] == "0"
    assert "ray.io/worker-group-replica-name" not in labels
    assert "ray.io/replica-host-index" not in labels
    assert "replicaIndex" not in labels
    assert "hostname" not in pod["spec"] and "subdomain" not in pod["spec"]
    assert pod["metadata"]["generateName"] == "demo-cpu-worker-"


def test_gate_off_leaves_index_labels_out() -> None:
    pod = build_worker_pod(
        CLUSTER, TPU, replica_index=0, replica_name=None, host_index=1, indexing_labels=False
    )
    labels = pod["metadata"]["labels"]
    assert not {k for k in labels if k.startswith("ray.io/") and "replica" in k}


USER_LABELS = st.dictionaries(
    st.sampled_from(
        [
            "ray.io/cluster",
            "ray.io/group",
            "ray.io/node-type",
            "ray.io/is-ray-node",
            "ray.io/identifier",
            "ray.io/worker-group-replica-index",
            "ray.io/worker-group-replica-name",
            "ray.io/replica-host-index",
            "replicaIndex",
            "app.kubernetes.io/created-by",
            "app.kubernetes.io/name",
            "team",
        ]
    ),
    st.sampled_from(["evil", "0", "7", "x"]),
)


@given(USER_LABELS, st.booleans())
def test_user_labels_never_override_the_operators(user: dict[str, str], multi: bool) -> None:
    obj = cluster_dict()
    group = obj["spec"]["workerGroupSpecs"][0 if multi else 1]
    group["template"].setdefault("metadata", {})["labels"] = user
    obj["spec"]["headGroupSpec"]["template"]["metadata"] = {"labels": user}
    cluster = load_cluster(obj)
    g = cluster.spec.worker_group_specs[0 if multi else 1]
    pod = worker_pod(cluster, g, replica=3, host=1 if multi else None, replica_name="tpu-bcd2f")
    labels = pod["metadata"]["labels"]
    assert labels["ray.io/cluster"] == "demo"
    assert labels["ray.io/group"] == g.group_name
    assert labels["ray.io/node-type"] == "worker"
    assert labels["ray.io/is-ray-node"] == "yes"
    assert labels["ray.io/worker-group-replica-index"] == "3"
    assert labels["app.kubernetes.io/created-by"] == OPERATOR_NAME
    if multi:
        assert labels["ray.io/worker-group-replica-name"] == "tpu-bcd2f"
        assert labels["ray.io/replica-host-index"] == "1"
    else:
        assert "ray.io/worker-group-replica-name" not in labels
        assert "ray.io/replica-host-index" not in labels
    head = build_head_pod(cluster)["metadata"]["labels"]
    assert head["ray.io/group"] == "headgroup" and head["ray.io/node-type"] == "head"
    assert not any("replica" in k for k in head if k.startswith("ray.io/"))


def test_namespace_is_forced_to_the_clusters() -> None:
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["namespace"] = "elsewhere"
    obj["spec"]["headGroupSpec"]["template"]["metadata"] = {"namespace": "elsewhere"}
    cluster = load_cluster(obj)
    head = build_head_pod(cluster)
    worker = worker_pod(cluster, host=0, replica_name="tpu-x")
    assert head["metadata"]["namespace"] == worker["metadata"]["namespace"] == "ml"


def test_template_finalizers_reach_every_pod_as_under_kuberay() -> None:
    """KubeRay builds a pod from its template's whole metadata, finalizers included (its e2e
    TestRayClusterScalingDown holds pods by one and counts the terminating worker)."""
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["finalizers"] = ["team.io/keep"]
    obj["spec"]["headGroupSpec"]["template"]["metadata"] = {"finalizers": ["team.io/logs"]}
    cluster = load_cluster(obj)
    head = build_head_pod(cluster)
    worker = worker_pod(cluster, host=0, replica_name="tpu-x")
    assert head["metadata"]["finalizers"] == ["team.io/logs"]
    assert worker["metadata"]["finalizers"] == ["team.io/keep"]
    assert "finalizers" not in build_head_pod(CLUSTER)["metadata"]


def test_multi_host_hostname_subdomain_and_tpu_env() -> None:
    pod = tpu_pod(replica=1, host=2)
    assert pod["spec"]["hostname"] == "tpu-1-2"
    assert pod["spec"]["subdomain"] == "demo-headless"
    env = env_of(pod)
    hostnames = ",".join(f"tpu-1-{h}.demo-headless" for h in range(4))
    assert env["TPU_WORKER_ID"] == "2"
    assert env["TPU_NAME"] == "tpu-1"
    assert env["TPU_WORKER_HOSTNAMES"] == hostnames
    assert env["TPU_ACCELERATOR_TYPE"] == "v6e-16"
    assert env["TPU_TOPOLOGY"] == "4x4"
    assert env["RAY_REPLICA_INDEX"] == "1"
    assert env["RAY_REPLICA_NAME"] == "tpu-bcd2f"
    assert env["RAY_HOST_INDEX"] == "2"
    assert env["RAY_NUM_HOSTS"] == "4"
    assert env["RAY_REPLICA_HOSTNAMES"] == hostnames


def test_every_host_of_a_slice_agrees_on_hostnames_and_they_match_pod_hostnames() -> None:
    pods = [tpu_pod(replica=5, host=h) for h in range(4)]
    lists = {env_of(p)["TPU_WORKER_HOSTNAMES"] for p in pods}
    assert len(lists) == 1
    (listed,) = lists
    assert listed.split(",") == [f"{p['spec']['hostname']}.{p['spec']['subdomain']}" for p in pods]
    assert [env_of(p)["TPU_WORKER_ID"] for p in pods] == ["0", "1", "2", "3"]


def test_user_set_tpu_env_is_kept() -> None:
    obj = cluster_dict()
    container = obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    container["env"] = [
        {"name": "TPU_NAME", "value": "mine"},
        {"name": "MEGASCALE_NUM_SLICES", "value": "2"},
    ]
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, replica=1, host=3, replica_name="tpu-x")
    env = env_of(pod)
    assert env["TPU_NAME"] == "mine"
    assert env["MEGASCALE_SLICE_ID"] == "1"
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "tpu-0-0.demo-headless"
    names = [e["name"] for e in pod["spec"]["containers"][0]["env"]]
    assert len(names) == len(set(names))


def test_single_host_tpu_without_index_names_its_slice_after_the_pod() -> None:
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"][0] = tpu_worker_group(numOfHosts=1)
    sel = obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    sel["cloud.google.com/gke-tpu-topology"] = "2x2"
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, replica=None)
    env = env_of(pod)
    assert env["TPU_NAME"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
    assert env["TPU_WORKER_ID"] == "0"
    assert "TPU_WORKER_HOSTNAMES" not in env
    assert "ray.io/worker-group-replica-index" not in pod["metadata"]["labels"]


def test_multi_host_needs_indices() -> None:
    with pytest.raises(ValueError, match="host_index"):
        build_worker_pod(CLUSTER, TPU, replica_index=0, replica_name="tpu-x", host_index=None)


def test_tpu_placement_is_merged_into_the_users_affinity() -> None:
    obj = cluster_dict()
    user_term = {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}
    node_affinity = {
        REQ: {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "spot", "operator": "DoesNotExist"}]}
            ]
        }
    }
    obj["spec"]["workerGroupSpecs"][0]["template"]["spec"]["affinity"] = {
        "nodeAffinity": node_affinity,
        "podAffinity": {REQ: [user_term]},
    }
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, replica=1, host=0, replica_name="tpu-x")
    affinity = pod["spec"]["affinity"]
    assert affinity["nodeAffinity"] == node_affinity
    terms = affinity["podAffinity"][REQ]
    assert terms[0] == user_term
    assert terms[1]["topologyKey"] == "cloud.google.com/gke-nodepool"
    assert terms[1]["labelSelector"]["matchLabels"]["ray.io/worker-group-replica-name"] == "tpu-x"
    assert affinity["podAntiAffinity"][REQ][0]["topologyKey"] == "cloud.google.com/gke-nodepool"


def test_worker_ray_start_matches_kuberay() -> None:
    pod = worker_pod(CLUSTER, CPU)
    container = pod["spec"]["containers"][0]
    assert container["command"] == ["/bin/bash", "-c", "--"]
    assert container["args"] == [
        f"{ULIMIT}; ray start --address=demo-head-svc.ml.svc.cluster.local:6379 --block "
        "--dashboard-agent-listen-port=52365 --metrics-export-port=8080 "
        "--node-ip-address=$MY_POD_IP --num-cpus=1"
    ]
    env = env_of(pod)
    assert env["FQ_RAY_IP"] == "demo-head-svc.ml.svc.cluster.local"
    assert env["RAY_IP"] == "demo-head-svc"
    assert env["RAY_ADDRESS"] == "demo-head-svc.ml.svc.cluster.local:6379"
    assert env["RAY_PORT"] == "6379"
    assert env["RAY_USAGE_STATS_KUBERAY_IN_USE"] == "1"
    assert env["RAY_CLUSTER_NAMESPACE"] == "ml"
    assert env["RAY_CLOUD_INSTANCE_ID"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
    }
    assert env["KUBERAY_GEN_RAY_START_CMD"] == container["args"][0].removeprefix(f"{ULIMIT}; ")
    assert "RAY_REPLICA_INDEX" not in env


def test_tpu_worker_start_has_tpu_resource_and_sizes() -> None:
    start = env_of(tpu_pod())["KUBERAY_GEN_RAY_START_CMD"]
    assert "--resources='{\"TPU\":4}'" in start
    assert "--num-cpus=8" in start
    assert f"--memory={16 * 2**30}" in start


def test_user_command_runs_before_ray_start_and_params_win() -> None:
    obj = cluster_dict()
    group = obj["spec"]["workerGroupSpecs"][1]
    group["rayStartParams"] = {"num-cpus": "3", "resources": '"{\\"Custom\\": 2}"'}
    group["template"]["spec"]["containers"][0]["command"] = ["pip", "install", "x"]
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, 1)
    (line,) = pod["spec"]["containers"][0]["args"]
    assert line.startswith(f"pip install x && {ULIMIT}; ray start ")
    assert "--num-cpus=3" in line
    # Passed through as written, so the shell unquotes it as under KubeRay.
    assert '--resources="{\\"Custom\\": 2}"' in line
    assert shlex.split(line.split("; ", 1)[1])[-1] == '--resources={"Custom": 2}'


def test_a_user_command_that_runs_ray_start_is_left_alone() -> None:
    obj = cluster_dict()
    container = obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    container["command"] = ["bash", "-c"]
    container["args"] = ["ray start --address=x:6379 --block"]
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, 1)
    assert pod["spec"]["containers"][0]["args"] == ["ray start --address=x:6379 --block"]


def test_overwrite_container_cmd_annotation_keeps_the_users_command() -> None:
    obj = cluster_dict()
    obj["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["command"] = ["mine"]
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, 1)
    assert pod["spec"]["containers"][0]["command"] == ["mine"]
    assert "args" not in pod["spec"]["containers"][0]


def test_head_ray_start_and_ports() -> None:
    pod = build_head_pod(CLUSTER)
    container = pod["spec"]["containers"][0]
    assert container["args"] == [
        f"{ULIMIT}; ray start --head --block --dashboard-agent-listen-port=52365 "
        f"--dashboard-host=0.0.0.0 --memory={4 * 2**30} --metrics-export-port=8080 "
        "--node-ip-address=$MY_POD_IP --num-cpus=2"
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080}]
    assert {"name": "shared-mem", "mountPath": "/dev/shm"} in container["volumeMounts"]
    shm = {"name": "shared-mem", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}
    assert shm in pod["spec"]["volumes"]
    assert env_of(pod)["RAY_ADDRESS"] == "127.0.0.1:6379"
    assert len(pod["spec"]["containers"]) == 1
    assert "restartPolicy" not in pod["spec"]


def test_autoscaling_adds_sidecar_and_service_account() -> None:
    cluster = make_cluster(enableInTreeAutoscaling=True)
    head = build_head_pod(cluster)
    ray, side = head["spec"]["containers"]
    assert "--no-monitor" in ray["args"][0]
    assert side["name"] == "autoscaler"
    assert side["image"] == ray["image"]
    # Ray's `ray kuberay-autoscaler` with the slice-scaling correction (design rule 7b).
    assert side["command"][:2] == ["python", "-c"]
    assert "run_kuberay_autoscaler(" in side["command"][2]
    assert side["args"] == [
        "--cluster-name",
        "demo",
        "--cluster-namespace",
        "ml",
    ]
    side_env = env_of(head, 1)
    assert side_env["RAY_CLUSTER_NAME"] == "demo"
    assert side_env["RAY_CLUSTER_NAMESPACE"] == "ml"
    assert side_env["KUBERAY_CRD_VER"] == "v1"
    assert side_env["RAY_HEAD_POD_NAME"] == {
        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}
    }
    assert head["spec"]["serviceAccountName"] == "demo"
    assert {"name": "ray-logs", "mountPath": "/tmp/ray"} in side["volumeMounts"]
    assert {"name": "ray-logs", "mountPath": "/tmp/ray"} in ray["volumeMounts"]
    worker = worker_pod(cluster, 1)
    # Autoscaler v1: pods keep their restart policy (KubeRay).
    assert "restartPolicy" not in worker["spec"] and "restartPolicy" not in head["spec"]


V2_ENV = [{"name": "RAY_enable_autoscaler_v2", "value": "1"}]


@pytest.mark.parametrize("by_option", [True, False])
def test_autoscaler_v2_makes_pods_restart_never(by_option: bool) -> None:
    obj = cluster_dict(enableInTreeAutoscaling=True)
    if by_option:
        obj["spec"]["autoscalerOptions"] = {"version": "v2"}
    else:
        obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"] = V2_ENV
    cluster = load_cluster(obj)
    head = build_head_pod(cluster)
    worker = worker_pod(cluster, 1)
    assert head["spec"]["restartPolicy"] == worker["spec"]["restartPolicy"] == "Never"
    assert env_of(head)["RAY_enable_autoscaler_v2"] in ("1", "true")


def test_autoscaler_options_image_and_user_service_account_win() -> None:
    obj = cluster_dict(
        enableInTreeAutoscaling=True,
        autoscalerOptions={
            "image": "custom:1",
            "version": "v2",
            "env": [{"name": "X", "value": "1"}],
        },
    )
    obj["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "mine"
    cluster = load_cluster(obj)
    head = build_head_pod(cluster)
    assert head["spec"]["serviceAccountName"] == "mine"
    assert head["spec"]["containers"][1]["image"] == "custom:1"
    assert env_of(head, 1)["X"] == "1"
    assert env_of(head)["RAY_enable_autoscaler_v2"] == "true"


def test_builders_do_not_mutate_the_cluster() -> None:
    cluster = make_cluster(enableInTreeAutoscaling=True)
    before = copy.deepcopy(cluster.model_dump())
    build_head_pod(cluster)
    for h in range(4):
        worker_pod(cluster, host=h, replica_name="tpu-x")
    assert cluster.model_dump() == before


def test_gpu_nvlink_hosts_get_a_ray_gpu_domain_label() -> None:
    obj = cluster_dict()
    obj["spec"]["workerGroupSpecs"][1].update(numOfHosts=2)
    container = obj["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": "4", "cpu": "16"}}
    cluster = load_cluster(obj)
    pod = worker_pod(cluster, 1, replica=2, host=1, replica_name="cpu-x")
    start = env_of(pod)["KUBERAY_GEN_RAY_START_CMD"]
    # The slice's ComputeDomain name, <cluster>-<replica name> (rule 13b) ...
    assert "--labels=ray.io/gpu-domain=demo-cpu-x" in start
    assert "--num-gpus=4" in start
    term = pod["spec"]["affinity"]["podAffinity"][REQ][0]
    assert term["topologyKey"] == "nvidia.com/gpu.clique"
    # Not exclusive: other slices are only avoided while a free clique is left.
    anti = pod["spec"]["affinity"]["podAntiAffinity"]
    assert REQ not in anti
    (apart,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert apart["weight"] == 100
    assert apart["podAffinityTerm"] == {
        "labelSelector": {
            "matchLabels": {"ray.io/cluster": "demo"},
            "matchExpressions": [
                {"key": "replicaIndex", "operator": "Exists"},
                {"key": "replicaIndex", "operator": "NotIn", "values": ["cpu-2"]},
            ],
        },
        "topologyKey": "nvidia.com/gpu.clique",
    }
    assert pod["metadata"]["labels"]["replicaIndex"] == "cpu-2"
    assert "TPU_NAME" not in env_of(pod)
    # ... and its slice name when the group opts out of domains.
    opted = obj["spec"]["workerGroupSpecs"][1]["template"]
    opted["metadata"] = {"annotations": {"raycluster-operator.io/compute-domain": "false"}}
    cluster = load_cluster(obj)
    group = cluster.spec.worker_group_specs[1]
    pod = worker_pod(cluster, group, replica=2, host=1, replica_name="cpu-x")
    assert "--labels=ray.io/gpu-domain=cpu-2" in env_of(pod)["KUBERAY_GEN_RAY_START_CMD"]


def _run_open_files_raise(hard: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The generated command's raise in bash, under a hard open-files limit of ``hard``
    that the shell may not lift (as in a container without CAP_SYS_RESOURCE)."""

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))

    return subprocess.run(
        ["/bin/bash", "-c", "--", f"{ULIMIT}; echo soft=$(ulimit -n)"],
        capture_output=True,
        text=True,
        preexec_fn=lower,
        env={"PATH": os.environ["PATH"], **env},
        check=True,
    )


def test_the_open_files_raise_says_nothing_and_reaches_the_hard_limit_when_lower() -> None:
    """docs/design.md, rule 3.4b: KubeRay's ``ulimit -n 65536`` printed "cannot modify
    limit" in every pod where the hard limit is lower; ours raises as far as allowed."""
    done = _run_open_files_raise(4096, {})
    assert (done.stdout, done.stderr) == ("soft=4096\n", "")


def test_the_open_files_raise_is_kuberays_where_it_is_permitted() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 65536:
        # Below KubeRay's number, a raise to it is refused here: show the knob instead.
        done = _run_open_files_raise(hard, {"RAY_START_ULIMIT_OPEN_FILES": str(hard - 1)})
        assert (done.stdout, done.stderr) == (f"soft={hard - 1}\n", "")
        return
    done = _run_open_files_raise(hard, {})
    assert (done.stdout, done.stderr) == ("soft=65536\n", "")


def test_an_exclusive_slice_keeps_every_other_clusters_slices_out_of_its_pool() -> None:
    """kube-scheduler places pods one by one: without the cluster-wide term two clusters'
    slices could each start in one pool and neither ever fit (docs/design.md §3.5)."""
    pod = tpu_pod()
    raw = cluster_dict()
    raw["metadata"]["name"] = "other"
    other_cluster = load_cluster(raw)
    other_group = other_cluster.spec.worker_group_specs[0]
    other = worker_pod(other_cluster, other_group, replica=1, host=2, replica_name="x")
    mine, theirs = (p["metadata"]["labels"]["ray.io/slice-id"] for p in (pod, other))
    assert mine != theirs
    terms = pod["spec"]["affinity"]["podAntiAffinity"][REQ]
    wide = [t for t in terms if "namespaceSelector" in t]
    assert wide == [
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": "ray.io/slice-id", "operator": "Exists"},
                    {"key": "ray.io/slice-id", "operator": "NotIn", "values": [mine]},
                ]
            },
            "namespaceSelector": {},
            "topologyKey": "cloud.google.com/gke-nodepool",
        }
    ]
    # A slice's own hosts share the id, so the term never pushes them apart.
    assert tpu_pod(host=0)["metadata"]["labels"]["ray.io/slice-id"] == mine
