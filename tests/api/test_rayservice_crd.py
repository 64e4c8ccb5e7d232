"""The RayService CRD: every field of KubeRay v1.7's with its type, default, bounds and
required fields, its CEL rules and printer columns; nothing else outside the embedded
RayCluster spec/status and Service (docs/design.md §12)."""

from __future__ import annotations

from typing import Any

from api.kuberay_rayservice_facts import CEL_RULES, FIELDS, PRINTER_COLUMNS
from raycluster_operator.controller.crds import rayservice_crd_manifest

VERSION = rayservice_crd_manifest()["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]
EMBEDDED = ("rayClusterConfig", "serveService", "rayClusterStatus")


def node(path: str) -> dict[str, Any]:
    current: dict[str, Any] = SCHEMA
    for part in path.split("."):
        if part.endswith("[]"):
            current = current["properties"][part[:-2]]["items"]
        elif part.endswith("{}"):
            current = current["properties"][part[:-2]]["additionalProperties"]
        else:
            current = current["properties"][part]
    return current


def walk(schema: dict[str, Any], path: str = "") -> list[str]:
    out = []
    for name, child in schema.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        out.append(here)
        if name in EMBEDDED:
            continue
        out += walk(child, here)
        if isinstance(child.get("items"), dict):
            out += walk(child["items"], f"{here}[]")
        if isinstance(child.get("additionalProperties"), dict):
            out += walk(child["additionalProperties"], f"{here}{{}}")
    return out


def test_every_kuberay_field_with_its_facts() -> None:
    for path, facts in FIELDS.items():
        ours = node(path)
        assert {k: ours[k] for k in facts if k in ours} == facts, path


def test_no_field_kuberay_lacks() -> None:
    ours = {p for p in walk(SCHEMA) if p not in ("apiVersion", "kind", "metadata")}
    assert ours == set(FIELDS)


def test_cel_rules_printer_columns_and_status_subresource() -> None:
    for path, rules in CEL_RULES.items():
        assert [r["rule"] for r in node(path)["x-kubernetes-validations"]] == rules, path
    crd = rayservice_crd_manifest()
    assert crd["metadata"]["name"] == "rayservices.ray.io"
    columns = [(c["name"], c["type"], c["jsonPath"]) for c in VERSION["additionalPrinterColumns"]]
    assert columns == PRINTER_COLUMNS
    assert VERSION["subresources"] == {"status": {}}
