"""Structural schemas as kube-apiserver applies them, seen through the real kubectl.

Two CRDs: ours (rayclusters.ray.io, the operator's full KubeRay-shaped schema) for the messages
a user meets, and a small `gadgets` CRD that uses every schema keyword the dev server enforces.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_compat_kubectl import Kubectl

from devkube.server import ApiServer
from devkube.server.schema import structural
from raycluster_operator.controller.crds import crd_manifest
from tests.harness.manifests import crd

RAYCLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: demo}
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers: [{name: ray-head, image: rayproject/ray:2.60.0}]
  workerGroupSpecs:
  - groupName: tpu
    replicas: 1
    minReplicas: 0
    maxReplicas: 2
    template:
      spec:
        containers: [{name: ray-worker, image: rayproject/ray:2.60.0}]
"""

GADGETS = crd(
    "gadgets",
    "Gadget",
    schema={
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {
                        "type": "integer",
                        "format": "int32",
                        "minimum": 1,
                        "maximum": 10,
                    },
                    "color": {"type": "string", "enum": ["red", "blue"]},
                    "code": {
                        "type": "string",
                        "minLength": 2,
                        "maxLength": 4,
                        "pattern": "^[A-Z]+$",
                    },
                    "tags": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2,
                        "items": {"type": "string"},
                    },
                    "port": {
                        "x-kubernetes-int-or-string": True,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                    },
                    "note": {"type": "string", "nullable": True},
                    "mode": {"type": "string", "default": "auto"},
                    "labels": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                    },
                    "free": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    },
                    "inner": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {"spec": {"type": "object"}},
                    },
                },
            },
            "status": {
                "type": "object",
                "properties": {"count": {"type": "integer"}},
            },
        },
    },
)


@pytest.fixture
async def kubectl(server: ApiServer, tmp_path: Path) -> Kubectl:
    k = Kubectl.for_cluster(server, tmp_path)
    for definition in (crd_manifest(), GADGETS):
        await k("apply", "--server-side", "-f", "-", stdin=json.dumps(definition))
    await k("wait", "--for", "condition=established", "crd", "--all", "--timeout=10s")
    return k


def cluster(**group: Any) -> str:
    doc = yaml.safe_load(RAYCLUSTER)
    doc["spec"]["workerGroupSpecs"][0].update(group)
    return yaml.safe_dump(doc)


async def test_a_wrong_type_is_refused_with_kube_apiservers_message(kubectl: Kubectl) -> None:
    rc, _, err = await kubectl("apply", "-f", "-", stdin=cluster(numOfHosts="four"), ok=False)
    assert rc != 0
    assert err.strip() == (
        'The RayCluster "demo" is invalid: spec.workerGroupSpecs[0].numOfHosts: Invalid value: '
        '"string": spec.workerGroupSpecs[0].numOfHosts in body must be of type integer: '
        '"string"'
    )


async def test_a_misspelt_field_is_refused_under_kubectls_default_strict_validation(
    kubectl: Kubectl,
) -> None:
    rc, _, err = await kubectl("apply", "-f", "-", stdin=cluster(numOfHost=4), ok=False)
    assert rc != 0
    assert (
        'RayCluster in version "v1" cannot be handled as a RayCluster: strict decoding error: '
        'unknown field "spec.workerGroupSpecs[0].numOfHost"'
    ) in err
    rc, _, _ = await kubectl("get", "raycluster", "demo", ok=False)
    assert rc != 0  # nothing was stored


async def test_warn_prunes_with_a_warning_and_ignore_prunes_silently(kubectl: Kubectl) -> None:
    _, out, err = await kubectl("apply", "--validate=warn", "-f", "-", stdin=cluster(numOfHost=4))
    assert "created" in out
    assert 'Warning: unknown field "spec.workerGroupSpecs[0].numOfHost"' in err
    _, out, _ = await kubectl("get", "raycluster", "demo", "-o", "yaml")
    group = yaml.safe_load(out)["spec"]["workerGroupSpecs"][0]
    # Pruned, and defaulted on write as KubeRay's CRD defaults it.
    assert "numOfHost" not in group
    assert group["numOfHosts"] == 1
    assert group["maxReplicas"] == 2 and group["minReplicas"] == 0
    doc = yaml.safe_load(cluster(bogus=True))
    doc["metadata"]["name"] = "quiet"
    _, out, err = await kubectl("apply", "--validate=false", "-f", "-", stdin=yaml.safe_dump(doc))
    assert "created" in out and "Warning" not in err
    _, out, _ = await kubectl("get", "raycluster", "quiet", "-o", "json")
    assert "bogus" not in json.loads(out)["spec"]["workerGroupSpecs"][0]


async def test_every_write_path_is_validated(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=cluster())
    group_path = "spec.workerGroupSpecs[0]"
    type_error = (
        f'{group_path}.replicas: Invalid value: "string": {group_path}.replicas in body must '
        'be of type integer: "string"'
    )
    # update (kubectl replace), merge patch, JSON patch, server-side apply.
    _, out, _ = await kubectl("get", "raycluster", "demo", "-o", "json")
    obj = json.loads(out)
    obj["spec"]["workerGroupSpecs"][0]["replicas"] = "x"
    rc, _, err = await kubectl("replace", "-f", "-", stdin=json.dumps(obj), ok=False)
    assert rc != 0 and type_error in err
    merge = {
        "spec": {
            "workerGroupSpecs": [
                {**yaml.safe_load(cluster())["spec"]["workerGroupSpecs"][0], "replicas": "x"}
            ]
        }
    }
    rc, _, err = await kubectl(
        "patch", "raycluster", "demo", "--type=merge", "-p", json.dumps(merge), ok=False
    )
    assert rc != 0 and type_error in err
    ops = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": "x"}]
    rc, _, err = await kubectl(
        "patch", "raycluster", "demo", "--type=json", "-p", json.dumps(ops), ok=False
    )
    assert rc != 0 and type_error in err
    # kubectl patch sends no fieldValidation: the server's default (Warn) prunes and warns.
    ops = [{"op": "add", "path": "/spec/workerGroupSpecs/0/bogus", "value": 1}]
    _, _, err = await kubectl("patch", "raycluster", "demo", "--type=json", "-p", json.dumps(ops))
    assert 'Warning: unknown field "spec.workerGroupSpecs[0].bogus"' in err
    rc, _, err = await kubectl(
        "apply", "--server-side", "-f", "-", stdin=cluster(replicas="x"), ok=False
    )
    assert rc != 0 and type_error in err
    # The status subresource too.
    rc, _, err = await kubectl(
        "patch",
        "raycluster",
        "demo",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"readyWorkerReplicas":"x"}}',
        ok=False,
    )
    assert rc != 0
    assert (
        'status.readyWorkerReplicas: Invalid value: "string": status.readyWorkerReplicas in '
        'body must be of type integer: "string"'
    ) in err


async def test_explain_reaches_the_leaves(kubectl: Kubectl) -> None:
    _, out, _ = await kubectl("explain", "rayclusters.spec.workerGroupSpecs.numOfHosts")
    assert "FIELD: numOfHosts <integer>" in out
    assert "multi-host TPU slice" in out
    _, out, _ = await kubectl(
        "explain", "rayclusters.spec.workerGroupSpecs.template.spec.containers.resources.limits"
    )
    assert "FIELD: limits" in out
    _, out, _ = await kubectl("explain", "rayclusters.spec.idleSuspend")
    assert "EXTENSION" in out


GADGET_CASES = [
    (
        {"size": 0},
        "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
    ),
    (
        {"size": 11},
        "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
    ),
    (
        {"size": 1, "color": "green"},
        'spec.color: Unsupported value: "green": supported values: "red", "blue"',
    ),
    (
        {"size": 1, "code": "A"},
        'spec.code: Invalid value: "A": spec.code in body should be at least 2 chars long',
    ),
    ({"size": 1, "code": "ABCDE"}, "spec.code: Too long: may not be more than 4 bytes"),
    (
        {"size": 1, "code": "ab"},
        "spec.code: Invalid value: \"ab\": spec.code in body should match '^[A-Z]+$'",
    ),
    (
        {"size": 1, "tags": []},
        "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
    ),
    ({"size": 1, "tags": ["a", "b", "c"]}, "spec.tags: Too many: 3: must have at most 2 items"),
    (
        {"size": 1, "port": True},
        'spec.port: Invalid value: "boolean": spec.port in body must '
        'be of type integer,string: "boolean"',
    ),
    (
        {"size": 1, "labels": {"a": 1}},
        'spec.labels.a: Invalid value: "integer": spec.labels.a '
        'in body must be of type string: "integer"',
    ),
    ({}, "spec.size: Required value"),
]


@pytest.mark.parametrize(("spec", "message"), GADGET_CASES)
def test_every_keyword_is_enforced_with_kube_wording(spec: dict[str, Any], message: str) -> None:
    schema = GADGETS["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[index]
    causes = structural.apply({"spec": spec}, schema).causes
    assert [f"{field}: {text}" for field, text, _ in causes] == [message]


def test_nulls_embedded_resources_and_defaults() -> None:
    schema = GADGETS["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[index]
    shaped = structural.apply({"spec": {"size": 1, "note": None, "mode": None}}, schema)
    assert shaped.causes == []
    # A nullable field keeps its null; a non-nullable null is dropped, then defaulted.
    assert shaped.obj["spec"]["note"] is None and shaped.obj["spec"]["mode"] == "auto"
    causes = structural.apply({"spec": {"size": 1, "inner": {"spec": {}}}}, schema).causes
    assert [f"{c[0]}: {c[1]}" for c in causes] == [
        "spec.inner.apiVersion: Required value: must not be empty",
        "spec.inner.kind: Required value: must not be empty",
    ]


async def test_keywords_that_admit_shape_the_stored_object(kubectl: Kubectl) -> None:
    gadget = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {
            "size": 3,
            "port": "http",
            "free": {"anything": {"goes": [1]}},
            "inner": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {}},
        },
    }
    await kubectl("apply", "-f", "-", stdin=json.dumps(gadget))
    _, out, _ = await kubectl("get", "gadget", "g", "-o", "json")
    spec = json.loads(out)["spec"]
    assert spec["mode"] == "auto"  # defaulted
    assert spec["free"] == {"anything": {"goes": [1]}}  # preserved
    assert spec["inner"]["metadata"] == {"name": "x"}  # embedded resource keeps its metadata
    rc, _, err = await kubectl(
        "apply", "-f", "-", stdin=json.dumps({**gadget, "spec": {"size": 2**31}}), ok=False
    )
    assert rc != 0 and "Checked value must be of type integer with format int32" in err


async def test_a_new_default_applies_to_stored_objects_on_read(kubectl: Kubectl) -> None:
    gadget = {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "old"},
        "spec": {"size": 2},
    }
    await kubectl("apply", "-f", "-", stdin=json.dumps(gadget))
    _, out, _ = await kubectl("get", "gadget", "old", "-o", "json")
    before = json.loads(out)
    crd = json.loads(json.dumps(GADGETS))
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"
    ]
    props["color"]["default"] = "blue"
    await kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps(crd))
    _, out, _ = await kubectl("get", "gadget", "old", "-o", "json")
    after = json.loads(out)
    assert after["spec"]["color"] == "blue"
    # Defaulted on read: not a write, so the resourceVersion is the same.
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


POD = """
apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  containers:
  - name: c
    image: busybox
    ports: [{containerPort: 80}]
"""


async def test_built_in_kinds_are_decoded_as_the_go_decoder_does(kubectl: Kubectl) -> None:
    typo = POD.replace("image: busybox", "image: busybox\n    imagePullPolicyy: Always")
    rc, _, err = await kubectl("apply", "-f", "-", stdin=typo, ok=False)
    assert rc != 0
    assert (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field '
        '"spec.containers[0].imagePullPolicyy"'
    ) in err
    wrong = POD.replace("containerPort: 80", 'containerPort: "80"')
    rc, _, err = await kubectl("apply", "-f", "-", stdin=wrong, ok=False)
    assert rc != 0
    assert (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go '
        "struct field ContainerPort.spec.containers.ports.containerPort of type int32"
    ) in err
    _, out, err = await kubectl("apply", "--validate=warn", "-f", "-", stdin=typo)
    assert 'Warning: unknown field "spec.containers[0].imagePullPolicyy"' in err
    _, out, _ = await kubectl("get", "pod", "p1", "-o", "json")
    assert "imagePullPolicyy" not in json.loads(out)["spec"]["containers"][0]


def test_the_built_in_schemas_are_generated_from_kubernetes_openapi() -> None:
    deploy = Path(__file__).parents[2] / "deploy"
    sys.path.insert(0, str(deploy))
    try:
        k8s_schemas = importlib.import_module("k8s_schemas")
    finally:
        sys.path.remove(str(deploy))
    assert k8s_schemas.BUILTIN_OUT.read_text() == k8s_schemas.render_builtin()


async def test_kuberays_printer_columns_and_no_second_age(kubectl: Kubectl) -> None:
    await kubectl("apply", "-f", "-", stdin=cluster())
    _, out, _ = await kubectl("get", "rayclusters")
    assert out.splitlines()[0].split() == [
        "NAME",
        "DESIRED",
        "WORKERS",
        "AVAILABLE",
        "WORKERS",
        "CPUS",
        "MEMORY",
        "GPUS",
        "READY",
        "SLICES",
        "STATUS",
        "AGE",
    ]


async def test_a_crd_whose_schema_is_not_structural_is_refused(kubectl: Kubectl) -> None:
    crd = json.loads(json.dumps(GADGETS))
    crd["metadata"]["name"] = "bads.example.com"
    crd["spec"]["names"] = {"plural": "bads", "singular": "bad", "kind": "Bad"}
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    del spec["type"]
    spec["properties"]["size"]["default"] = 0
    rc, _, err = await kubectl("apply", "-f", "-", stdin=json.dumps(crd), ok=False)
    assert rc != 0
    where = "spec.versions[0].schema.openAPIV3Schema.properties[spec]"
    assert f"{where}.type: Required value: must not be empty for specified object fields" in err
    assert (
        f"{where}.properties[size].default: Invalid value: 0: {where}.properties[size].default "
        "in body should be greater than or equal to 1"
    ) in err
