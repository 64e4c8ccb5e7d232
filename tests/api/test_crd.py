"""The CRD: structural, accepts every KubeRay-shaped RayCluster, rejects impossible counts."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from raycluster_operator.api.crd import crd_manifest
from raycluster_operator.api.models import INT32_MAX
from raycluster_operator.cli import main

VERSION = crd_manifest()["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]

KUBERAY_SAMPLE: dict[str, Any] = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "raycluster-complete", "namespace": "default"},
    "spec": {
        "rayVersion": "2.60.0",
        "enableInTreeAutoscaling": True,
        "autoscalerOptions": {
            "upscalingMode": "Default",
            "idleTimeoutSeconds": 60,
            "imagePullPolicy": "IfNotPresent",
            "version": "v2",
        },
        "headGroupSpec": {
            "serviceType": "ClusterIP",
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "ray-head",
                            "image": "rayproject/ray:2.60.0",
                            "lifecycle": {
                                "preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}
                            },
                        }
                    ],
                    "volumes": [{"name": "logs", "emptyDir": {}}],
                }
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "tpu-group",
                "replicas": 1,
                "minReplicas": 0,
                "maxReplicas": 3,
                "numOfHosts": 4,
                "rayStartParams": {},
                "scaleStrategy": {"workersToDelete": ["a", "b"]},
                "someFutureField": {"x": 1},
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "ray-worker",
                                "image": "x",
                                "resources": {"limits": {"google.com/tpu": 4}},
                            }
                        ]
                    }
                },
            },
        ],
        "futureSpecField": True,
    },
    "status": {
        "state": "ready",
        "desiredWorkerSlices": 1,
        "workerGroups": [
            {
                "groupName": "tpu-group",
                "numOfHosts": 4,
                "desiredSlices": 1,
                "readySlices": 1,
                "brokenSlices": 0,
                "desiredPods": 4,
                "readyPods": 4,
            }
        ],
        "conditions": [],
    },
}


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, child in node.get("properties", {}).items():
        out += walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += walk(node["additionalProperties"], f"{path}{{}}")
    return out


def test_the_schema_is_structural() -> None:
    # Every node says its type; defaults satisfy their own bounds (the API server checks both).
    for path, node in walk(SCHEMA):
        assert "type" in node, path
        if "default" in node:
            jsonschema.validate(node["default"], node)


def test_identity_and_subresources() -> None:
    crd = crd_manifest()
    assert crd["metadata"]["name"] == "rayclusters.ray.io"
    assert crd["spec"]["group"] == "ray.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["plural"] == "rayclusters"
    assert VERSION["name"] == "v1" and VERSION["served"] and VERSION["storage"]
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert columns == {
        "Desired Pods": ".status.desiredWorkerReplicas",
        "Ready Pods": ".status.readyWorkerReplicas",
        "Ready Slices": ".status.readyWorkerSlices",
        "Status": ".status.state",
        "Age": ".metadata.creationTimestamp",
    }


def test_defaults_match_kuberay() -> None:
    group = SCHEMA["properties"]["spec"]["properties"]["workerGroupSpecs"]["items"]["properties"]
    assert group["numOfHosts"]["default"] == 1 and group["numOfHosts"]["minimum"] == 1
    assert group["minReplicas"]["default"] == 0
    assert group["maxReplicas"]["default"] == INT32_MAX
    for field in ("replicas", "minReplicas", "maxReplicas"):
        assert group[field]["minimum"] == 0 and group[field]["format"] == "int32"


def test_unmodelled_fields_and_pod_templates_are_preserved() -> None:
    spec = SCHEMA["properties"]["spec"]
    assert spec["x-kubernetes-preserve-unknown-fields"] is True
    assert (
        spec["properties"]["headGroupSpec"]["properties"]["template"][
            "x-kubernetes-preserve-unknown-fields"
        ]
        is True
    )
    assert SCHEMA["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_a_kuberay_cluster_is_accepted() -> None:
    jsonschema.validate(KUBERAY_SAMPLE, SCHEMA)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("numOfHosts", 0),
        ("replicas", -1),
        ("minReplicas", -1),
        ("maxReplicas", INT32_MAX + 1),
        ("numOfHosts", "4"),
    ],
)
def test_impossible_counts_are_rejected(field: str, value: Any) -> None:
    obj = copy.deepcopy(KUBERAY_SAMPLE)
    obj["spec"]["workerGroupSpecs"][0][field] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, SCHEMA)


def test_the_official_client_reads_it() -> None:
    kubernetes = pytest.importorskip("kubernetes")
    client = kubernetes.client.ApiClient()
    crd = client.deserialize(
        json.dumps(crd_manifest()), "V1CustomResourceDefinition", "application/json"
    )
    assert crd.spec.versions[0].schema.open_apiv3_schema.properties["spec"].type == "object"


def test_cli_prints_yaml_and_json() -> None:
    runner = CliRunner()
    as_yaml = runner.invoke(main, ["manifests", "crd"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.output) == crd_manifest()
    as_json = runner.invoke(main, ["manifests", "crd", "-o", "json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output) == crd_manifest()
    bad = runner.invoke(main, ["manifests", "crd", "-o", "xml"])
    assert bad.exit_code != 0
