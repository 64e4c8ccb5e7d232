"""The CRD: KubeRay v1.6's full structural schema plus marked extensions, judged by the dev
API server's structural-schema engine (what kube-apiserver would do with it)."""

from __future__ import annotations

import copy
import importlib
import json
import sys
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from click.testing import CliRunner

import kustomize_render
from devkube.server.schema import structural
from raycluster_operator.api.crd import EXTENSION
from raycluster_operator.api.models import INT32_MAX
from raycluster_operator.cli import main
from raycluster_operator.controller.crds import crd_manifest
from tests.operator.kuberay_crd import KUBERAY_V17_FIELDS

DEPLOY = Path(__file__).parents[2] / "deploy"
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
    # Every node says its type (int-or-string nodes say so instead), and a default passes
    # its own schema (the API server checks both when the CRD is created).
    for path, node in walk(SCHEMA):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        if "default" in node:
            assert structural.apply(node["default"], node).causes == [], path


def test_nothing_is_preserved_but_free_form_kubernetes_objects() -> None:
    """Unknown fields are pruned (and refused by kubectl's strict validation) everywhere in
    spec and status, as under KubeRay's CRD."""
    preserved = [p for p, n in walk(SCHEMA) if n.get("x-kubernetes-preserve-unknown-fields")]
    assert all(".template." in p for p in preserved), preserved


def test_identity_subresources_and_kuberays_printer_columns() -> None:
    crd = crd_manifest()
    assert crd["metadata"]["name"] == "rayclusters.ray.io"
    assert crd["spec"]["group"] == "ray.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["plural"] == "rayclusters"
    assert crd["spec"]["names"]["categories"] == ["all"]
    assert VERSION["name"] == "v1" and VERSION["served"] and VERSION["storage"]
    assert VERSION["subresources"] == {"status": {}}
    columns = [
        (c["name"], c["jsonPath"], c.get("priority", 0))
        for c in VERSION["additionalPrinterColumns"]
    ]
    assert columns == [
        ("desired workers", ".status.desiredWorkerReplicas", 0),
        ("available workers", ".status.availableWorkerReplicas", 0),
        ("cpus", ".status.desiredCPU", 0),
        ("memory", ".status.desiredMemory", 0),
        ("gpus", ".status.desiredGPU", 0),
        ("tpus", ".status.desiredTPU", 1),
        ("ready slices", ".status.readyWorkerSlices", 0),
        ("status", ".status.state", 0),
        ("age", ".metadata.creationTimestamp", 0),
        ("head pod IP", ".status.head.podIP", 1),
        ("head service IP", ".status.head.serviceIP", 1),
    ]


def test_defaults_required_and_enums_match_kuberay() -> None:
    spec = SCHEMA["properties"]["spec"]
    group = spec["properties"]["workerGroupSpecs"]["items"]
    props = group["properties"]
    assert props["numOfHosts"]["default"] == 1
    assert props["replicas"]["default"] == 0 and props["minReplicas"]["default"] == 0
    assert props["maxReplicas"]["default"] == INT32_MAX
    for field in ("replicas", "minReplicas", "maxReplicas", "numOfHosts", "idleTimeoutSeconds"):
        assert props[field]["format"] == "int32" and props[field]["type"] == "integer"
    assert group["required"] == ["groupName", "maxReplicas", "minReplicas", "template"]
    assert spec["required"] == ["headGroupSpec"]
    assert spec["properties"]["headGroupSpec"]["required"] == ["template"]
    options = spec["properties"]["autoscalerOptions"]["properties"]
    assert options["upscalingMode"]["enum"] == ["Default", "Aggressive", "Conservative"]
    assert options["version"]["enum"] == ["v1", "v2"]
    assert spec["properties"]["upgradeStrategy"]["properties"]["type"]["enum"] == [
        "Recreate",
        "None",
        "RollingUpdate",
    ]
    assert spec["properties"]["authOptions"]["properties"]["mode"]["enum"] == [
        "disabled",
        "token",
    ]
    assert set(spec["properties"]) == {*KUBERAY_V17_FIELDS["spec"], *EXTENSIONS_IN_SPEC}


def test_kuberay_v17s_additions_have_its_shape() -> None:
    """KubeRay v1.7's fields, with its types, enums, defaults and list semantics (facts
    from its CRD file at v1.7.0), so a v1.7 object reads back unchanged under ours."""
    spec = SCHEMA["properties"]["spec"]["properties"]
    policy = spec["networkPolicy"]["properties"]
    assert policy["mode"]["enum"] == ["DenyAll", "DenyAllIngress", "DenyAllEgress"]
    assert policy["mode"]["default"] == "DenyAll"
    per_group = policy["workerGroups"]
    assert per_group["x-kubernetes-list-type"] == "map"
    assert per_group["x-kubernetes-list-map-keys"] == ["groupName"]
    assert per_group["items"]["required"] == ["groupName"]
    for rules in (policy["head"], policy["worker"], per_group["items"]):
        ingress = rules["properties"]["ingressRules"]["items"]["properties"]
        egress = rules["properties"]["egressRules"]["items"]["properties"]
        assert set(ingress) == {"from", "ports"} and set(egress) == {"to", "ports"}
        peer = ingress["from"]["items"]["properties"]
        assert set(peer) == {"ipBlock", "namespaceSelector", "podSelector"}
        assert peer["ipBlock"]["required"] == ["cidr"]
        assert "default" not in egress["ports"]["items"]["properties"]["protocol"]
    assert spec["tlsOptions"]["properties"] == {"enabled": {"description": ANY, "type": "boolean"}}
    collector = spec["historyServerOptions"]["properties"]["collectorOptions"]["properties"]
    assert set(collector) == {"env", "image", "imagePullPolicy", "resources"}
    ingress = spec["headGroupSpec"]["properties"]["ingressOptions"]["properties"]
    assert set(ingress) == {"host", "path", "pathType", "tls"}
    assert ingress["pathType"]["enum"] == ["Exact", "Prefix", "ImplementationSpecific"]
    priority = spec["workerGroupSpecs"]["items"]["properties"]["priority"]
    assert (priority["type"], priority["format"], priority["default"]) == ("integer", "int32", 0)
    options = spec["autoscalerOptions"]["properties"]
    for name in ("command", "args"):
        assert options[name]["items"] == {"type": "string"}


def test_a_stored_v17_cluster_loses_nothing_to_our_pruning() -> None:
    """The data loss a swap from KubeRay v1.7's CRD to ours caused: every v1.7 value is kept,
    and none is refused."""
    obj = copy.deepcopy(KUBERAY_SAMPLE)
    spec = obj["spec"]
    del spec["futureSpecField"], spec["workerGroupSpecs"][0]["someFutureField"]  # pruned
    selector = {"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}
    rules = {
        "ingressRules": [{"from": [{"namespaceSelector": selector}], "ports": [{"port": "http"}]}],
        "egressRules": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}}]}],
    }
    spec["networkPolicy"] = {
        "mode": "DenyAll",
        "head": rules,
        "worker": rules,
        "workerGroups": [{"groupName": "g", **rules}],
    }
    spec["tlsOptions"] = {"enabled": True}
    env = [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    collector = {"image": "c", "imagePullPolicy": "Always", "env": env}
    spec["historyServerOptions"] = {"collectorOptions": collector}
    spec["headGroupSpec"]["ingressOptions"] = {
        "host": "h",
        "path": "/",
        "pathType": "Exact",
        "tls": [{"hosts": ["h"], "secretName": "t"}],
    }
    spec["workerGroupSpecs"][0]["priority"] = 7
    spec["autoscalerOptions"] = {"command": ["a"], "args": ["b"]}
    result = structural.apply(copy.deepcopy(obj), SCHEMA)
    assert not result.causes
    assert structural.prune(copy.deepcopy(obj), SCHEMA) == obj


EXTENSIONS_IN_SPEC = {"idleSuspend", "idleTerminationOptions"}


def test_our_additions_are_marked() -> None:
    marked = {
        path
        for path, node in walk(SCHEMA)
        if str(node.get("description", "")).startswith(EXTENSION)
    }
    assert marked == {
        ".spec.idleSuspend",
        ".spec.idleTerminationOptions",
        ".spec.upgradeStrategy.rollingUpdate",
        ".spec.workerGroupSpecs[].maxUnavailable",
        ".status.desiredWorkerSlices",
        ".status.readyWorkerSlices",
        ".status.workerGroups",
    }


def test_the_pod_template_comes_from_kubernetes_openapi() -> None:
    template = SCHEMA["properties"]["spec"]["properties"]["headGroupSpec"]["properties"]["template"]
    container = template["properties"]["spec"]["properties"]["containers"]["items"]
    assert container["required"] == ["name"]
    assert container["properties"]["ports"]["items"]["properties"]["containerPort"] == {
        "type": "integer",
        "format": "int32",
    }
    limits = container["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert set(template["properties"]["metadata"]["properties"]) == {
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    }


def test_a_kuberay_cluster_is_accepted_and_unknown_fields_are_pruned() -> None:
    shaped = structural.apply(KUBERAY_SAMPLE, SCHEMA)
    assert shaped.causes == []
    assert sorted(shaped.unknown) == [
        "spec.futureSpecField",
        "spec.workerGroupSpecs[0].someFutureField",
    ]
    group = shaped.obj["spec"]["workerGroupSpecs"][0]
    assert group["numOfHosts"] == 4 and group["maxReplicas"] == 3
    assert shaped.obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["lifecycle"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "numOfHosts",
            "4",
            'Invalid value: "string": spec.workerGroupSpecs[0].numOfHosts in body must be of '
            'type integer: "string"',
        ),
        (
            "replicas",
            1.5,
            'Invalid value: "number": spec.workerGroupSpecs[0].replicas in body must be of '
            'type integer: "number"',
        ),
        (
            "maxReplicas",
            INT32_MAX + 1,
            'Invalid value: "": Checked value must be of type integer with format int32 in '
            "spec.workerGroupSpecs[0].maxReplicas",
        ),
        ("groupName", None, "Required value"),
    ],
)
def test_impossible_values_are_refused_as_kube_apiserver_words_it(
    field: str, value: Any, message: str
) -> None:
    obj = copy.deepcopy(KUBERAY_SAMPLE)
    obj["spec"]["workerGroupSpecs"][0][field] = value
    causes = structural.apply(obj, SCHEMA).causes
    assert [c[1] for c in causes] == [message]


def test_the_generated_files_are_up_to_date() -> None:
    """deploy/generate.py writes them; run it after changing crd.py or the Kubernetes
    version in deploy/k8s_schemas.py."""
    sys.path.insert(0, str(DEPLOY))
    try:
        generate = importlib.import_module("generate")
        k8s_schemas = importlib.import_module("k8s_schemas")
    finally:
        sys.path.remove(str(DEPLOY))
    assert k8s_schemas.OUT.read_text() == k8s_schemas.render()
    expected = generate.text([crd_manifest()], "the rayclusters.ray.io CRD")
    assert (DEPLOY / "base" / "crd.yaml").read_text() == expected


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
    (printed,) = kustomize_render.documents(as_yaml.output)  # libyaml: the same objects, faster
    assert printed == crd_manifest()
    as_json = runner.invoke(main, ["manifests", "crd", "-o", "json"])
    assert as_json.exit_code == 0
    assert json.loads(as_json.output) == crd_manifest()
    bad = runner.invoke(main, ["manifests", "crd", "-o", "xml"])
    assert bad.exit_code != 0


def test_our_crd_keeps_every_status_field_a_group_entry_can_carry() -> None:
    """A real API server prunes status fields the CRD does not declare; a field the planner
    reads back (a group's one-way suspension) must survive our own CRD."""
    from datetime import UTC, datetime

    from raycluster_operator.kube.pruning import prune
    from raycluster_operator.planning.group_plan import GroupTally
    from raycluster_operator.planning.reasons import DeleteReason
    from raycluster_operator.planning.status import Deletion, Observed, _group_entry

    tally = GroupTally("tpu", 4, 2, 1, 1, 4, 4)
    seen = Observed(
        tallies=[tally],
        head=None,
        head_service=None,
        problems=[],
        cluster_invalid=False,
        deletions={"tpu": Deletion(DeleteReason.HOST_FAILED, "host 1 failed", 4)},
        groups_suspending=frozenset({"tpu"}),
    )
    entry = _group_entry(tally, {}, seen, datetime(2026, 1, 1, tzinfo=UTC))
    assert {"suspending", "lastDeletion"} <= set(entry)
    kept, dropped = prune({"workerGroups": [entry]}, SCHEMA["properties"]["status"])
    assert dropped == []
    assert kept == {"workerGroups": [entry]}


def test_kuberays_cel_rules_are_kept_word_for_word() -> None:
    """KubeRay v1.6/v1.7's ``x-kubernetes-validations`` (from its generated CRD): managedBy is
    immutable and one of two values; v1.7's GCS backend is immutable and redisAddress is no
    longer required (a rocksdb backend has no Redis)."""
    spec = SCHEMA["properties"]["spec"]["properties"]
    assert spec["managedBy"]["x-kubernetes-validations"] == [
        {"message": "the managedBy field is immutable", "rule": "self == oldSelf"},
        {
            "message": "the managedBy field value must be either 'ray.io/kuberay-operator' "
            "or 'kueue.x-k8s.io/multikueue'",
            "rule": "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']",
        },
    ]
    gcs = spec["gcsFaultToleranceOptions"]
    assert "required" not in gcs
    assert gcs["properties"]["backend"]["enum"] == ["redis", "rocksdb"]
    assert gcs["properties"]["backend"]["x-kubernetes-validations"] == [
        {"message": "gcsFaultToleranceOptions.backend is immutable", "rule": "self == oldSelf"}
    ]
    assert gcs["properties"]["storage"]["properties"]["deletionPolicy"]["enum"] == [
        "DeleteWithCluster",
        "Retain",
    ]


def test_a_bad_max_unavailable_is_refused_by_the_schema() -> None:
    """Planned disruptions (docs/design.md §4 rule 12b): maxUnavailable counts slices, at
    least 1 (0 would let a drain wait for ever when no stand-in fits)."""
    for value, accepted in ((1, True), (2, True), (0, False), (-1, False), ("1", False)):
        obj = copy.deepcopy(KUBERAY_SAMPLE)
        obj["spec"]["workerGroupSpecs"][0]["maxUnavailable"] = value
        causes = structural.apply(obj, SCHEMA).causes
        assert (causes == []) is accepted, (value, causes)
    obj = copy.deepcopy(KUBERAY_SAMPLE)
    obj["spec"]["workerGroupSpecs"][0]["maxUnavailable"] = 0
    (cause,) = structural.apply(obj, SCHEMA).causes
    assert (
        "spec.workerGroupSpecs[0].maxUnavailable in body should be greater than or equal to 1"
        in cause[1]
    )
