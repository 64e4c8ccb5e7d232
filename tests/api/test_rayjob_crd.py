"""The RayJob CRD: a structural superset of KubeRay's (every field with its type, default,
enum and bounds; its CEL rules; its printer columns), our additions marked EXTENSION, the
embedded RayCluster spec our own."""

from __future__ import annotations

from typing import Any

from api.kuberay_rayjob_facts import CEL_RULES, FIELDS, PRINTER_COLUMNS
from devkube.server.schema import structural
from raycluster_operator.api.crd import EXTENSION, spec_schema
from raycluster_operator.controller.crds import rayjob_crd_manifest

VERSION = rayjob_crd_manifest()["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]
KEYS = ("type", "format", "default", "enum", "minimum", "minItems", "x-kubernetes-list-type")


def node(path: str) -> dict[str, Any]:
    current: dict[str, Any] = SCHEMA
    for part in path.split("."):
        if part.endswith("[]"):
            current = current["properties"][part[:-2]]["items"]
        else:
            current = current["properties"][part]
    return current


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for name, child in schema.get("properties", {}).items():
        out += walk(child, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        out += walk(schema["items"], f"{path}[]")
    return out


def test_every_kuberay_field_with_its_type_default_enum_and_bounds() -> None:
    for path, facts in FIELDS.items():
        ours = node(path)
        assert {k: ours[k] for k in KEYS if k in ours and k in facts} == facts, path
        assert set(facts) - {"required"} <= set(ours), path


def test_kuberays_cel_rules_are_written_into_the_crd() -> None:
    for path, rules in CEL_RULES.items():
        ours = [r["rule"] for r in node(path).get("x-kubernetes-validations", [])]
        assert ours == rules, path


def test_printer_columns_identity_and_status_subresource() -> None:
    crd = rayjob_crd_manifest()
    assert crd["metadata"]["name"] == "rayjobs.ray.io"
    assert crd["spec"]["names"]["categories"] == ["all"]
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in VERSION["additionalPrinterColumns"]]
    assert columns == PRINTER_COLUMNS
    assert VERSION["subresources"] == {"status": {}}


def test_only_marked_fields_are_ours() -> None:
    kuberay = set(FIELDS)
    for path, schema in walk(SCHEMA):
        if path in ("", "apiVersion", "kind", "metadata") or path.endswith("[]"):
            continue
        if path.startswith(("spec.rayClusterSpec", "spec.submitterPodTemplate")):
            continue
        if path.startswith("status.rayClusterStatus"):
            continue
        marked = str(schema.get("description", "")).startswith(EXTENSION)
        inside_marked = any(
            str(node(p).get("description", "")).startswith(EXTENSION) for p in _prefixes(path)
        )
        assert path in kuberay or marked or inside_marked, path


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    found = [".".join(parts[:i]) for i in range(1, len(parts))]
    return found + [p.removesuffix("[]") for p in found if p.endswith("[]")]


def test_the_embedded_cluster_spec_is_the_rayclusters() -> None:
    embedded = dict(node("spec.rayClusterSpec"))
    embedded.pop("description")
    ours = spec_schema()
    ours.pop("description")
    assert embedded == ours


def test_structural_defaults_and_a_kuberay_sample_decodes() -> None:
    sample = {
        "spec": {
            "entrypoint": "python /home/ray/samples/sample_code.py",
            "runtimeEnvYAML": "pip:\n  - requests==2.26.0\n",
            "rayClusterSpec": {
                "rayVersion": "2.52.0",
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": "r"}]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "small-group",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 5,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [{"name": "w", "image": "r"}]}},
                    }
                ],
            },
        }
    }
    shaped = structural.apply(sample, SCHEMA)
    assert shaped.causes == [] and shaped.unknown == []
    spec = shaped.obj["spec"]
    assert (spec["submissionMode"], spec["backoffLimit"], spec["ttlSecondsAfterFinished"]) == (
        "K8sJobMode",
        0,
        0,
    )
    assert spec["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] == 1
    for path, schema in walk(SCHEMA):
        assert "type" in schema or schema.get("x-kubernetes-int-or-string"), path
