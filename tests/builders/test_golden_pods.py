"""Worker pod manifests stay byte-identical across builder refactors (performance work).

The golden file was written by the builders before they were optimised; regenerate it only
for an intended change of output:
``GOLDEN_WRITE=1 .venv/bin/pytest tests/builders/test_golden_pods.py``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod, build_worker_pod

from .conftest import cluster_dict, tpu_worker_group, worker_pod

GOLDEN = Path(__file__).with_name("golden_pods.json")
EXAMPLES = Path(__file__).parents[2] / "examples"


def _variants() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        obj = yaml.safe_load(path.read_text())
        if obj.get("kind") != "RayCluster":
            continue  # a RayJob example: its cluster is the RayJob controller's to build
        obj["metadata"].setdefault("namespace", "default")
        obj["metadata"].setdefault("uid", "uid-example")
        yield path.stem, obj
    yield "demo", cluster_dict()
    v2 = cluster_dict(
        enableInTreeAutoscaling=True, autoscalerOptions={"version": "v2", "idleTimeoutSeconds": 9}
    )
    yield "autoscaler-v2", v2
    user = cluster_dict()
    group = user["spec"]["workerGroupSpecs"][0]
    container = group["template"]["spec"]["containers"][0]
    container["env"] = [
        {"name": "MEGASCALE_NUM_SLICES", "value": "2"},
        {"name": "TPU_WORKER_ID", "value": "7"},
    ]
    container["command"] = ["bash", "-c"]
    container["args"] = ["echo hi"]
    container["ports"] = [{"name": "metrics", "containerPort": 9999}]
    group["template"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                ]
            }
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"x": "y"}},
                    },
                }
            ]
        },
    }
    group["rayStartParams"] = {"num-cpus": "3", "block": "true"}
    group["resources"] = {"Custom": "2"}
    group["labels"] = {"tier": "gold"}
    yield "user-fields", user
    overwrite = cluster_dict()
    overwrite["metadata"]["annotations"] = {"ray.io/overwrite-container-cmd": "true"}
    yield "overwrite-cmd", overwrite
    own_start = cluster_dict()
    own = own_start["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
    own["command"] = ["sh", "-c", "ray start --address=x --block"]
    yield "user-ray-start", own_start
    single_tpu = cluster_dict(
        workerGroupSpecs=[tpu_worker_group(groupName="one", numOfHosts=1, replicas=3)]
    )
    single_tpu["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-tpu-topology"
    ] = "2x2"
    yield "single-host-tpu", single_tpu


def _render() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, obj in _variants():
        cluster = load_cluster(copy.deepcopy(obj))
        out[f"{name}/head"] = json.dumps(build_head_pod(cluster))
        for group in cluster.spec.worker_group_specs:
            hosts = group.num_of_hosts
            for replica in (0, 3):
                for host in sorted({0, hosts - 1}):
                    for indexed in (True, False):
                        pod = worker_pod(
                            cluster,
                            group,
                            replica=replica,
                            host=host if hosts > 1 else None,
                            indexing_labels=indexed,
                        )
                        key = f"{name}/{group.group_name}/{replica}/{host}/{indexed}"
                        out[key] = json.dumps(pod)
            if hosts == 1:
                pod = worker_pod(cluster, group, replica=None)
                out[f"{name}/{group.group_name}/unindexed"] = json.dumps(pod)
    return out


def test_worker_and_head_manifests_are_byte_identical_to_the_golden_file() -> None:
    rendered = _render()
    if os.environ.get("GOLDEN_WRITE"):
        GOLDEN.write_text(json.dumps(rendered, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert sorted(rendered) == sorted(golden)
    for key, text in rendered.items():
        assert text == golden[key], key


def test_building_twice_gives_the_same_bytes_and_leaves_the_spec_alone() -> None:
    """Per-group values computed once must not leak between pods or into the cluster."""
    for _, obj in _variants():
        cluster = load_cluster(copy.deepcopy(obj))
        before = cluster.model_dump(by_alias=True)
        for group in cluster.spec.worker_group_specs:
            hosts = group.num_of_hosts
            kwargs: dict[str, Any] = dict(
                replica_index=1,
                replica_name="r" if hosts > 1 else None,
                host_index=0 if hosts > 1 else None,
            )
            first = build_worker_pod(cluster, group, **kwargs)
            text = json.dumps(first)
            first["spec"]["containers"][0].setdefault("env", []).append({"name": "X"})
            first["metadata"]["labels"]["mutated"] = "yes"
            first["spec"].setdefault("affinity", {})["nodeAffinity"] = {"x": 1}
            first["spec"].setdefault("volumes", []).append({"name": "junk"})
            assert json.dumps(build_worker_pod(cluster, group, **kwargs)) == text
        assert cluster.model_dump(by_alias=True) == before
