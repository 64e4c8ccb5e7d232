"""Regenerate the OpenAPI v3 schemas of the built-in kinds the dev server serves (one file).

Run: .venv/bin/python deploy/k8s_openapi.py   (or deploy/generate.py, which runs this too)

- src/devkube/server/endpoints/builtin_openapi.json.gz: every definition a served built-in kind
  reaches, with descriptions, in the form kube-apiserver publishes at
  ``/openapi/v3/<group-version>``
  (``#/components/schemas/<name>`` references, a ``$ref`` with siblings wrapped in ``allOf``,
  one ``type`` per node), so that ``kubectl explain pods.spec.containers.resources`` works.

The source is the JSON Schema of Kubernetes' OpenAPI that ``kubernetes-validate`` ships (as
for ``k8s_schemas.py``); the file is gzipped with a fixed mtime so regenerating is byte-stable.
"""

from __future__ import annotations

import gzip
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from k8s_schemas import KUBERNETES_VERSION

OUT = Path(__file__).parent.parent / "src/devkube/server/endpoints/builtin_openapi.json.gz"
_PREFIX = "#/$defs/"
#: How kube-apiserver's v3 documents show the types with custom JSON forms.
_CUSTOM = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
        "type": "string",
        "format": "int-or-string",
        "description": "IntOrString is a type that can hold an int32 or a string.",
    },
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "type": "string",
        "description": "Quantity is a fixed-point representation of a number.",
    },
}


def _definitions() -> dict[str, Any]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    text = (root / f"v{KUBERNETES_VERSION}-local" / "_definitions.json").read_text()
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


def _convert(node: Any, used: set[str]) -> Any:
    if isinstance(node, list):
        return [_convert(item, used) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kinds = [k for k in value if k != "null"]
            out[key] = kinds[0] if kinds else "object"
        elif key in ("properties", "patternProperties") and isinstance(value, dict):
            # Property names are not keywords: JSONSchemaProps has a property called "$ref".
            out[key] = {name: _convert(prop, used) for name, prop in value.items()}
        elif key == "$ref":
            name = str(value).removeprefix(_PREFIX)
            used.add(name)
            out[key] = "#/components/schemas/" + name
        else:
            out[key] = _convert(value, used)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out["allOf"] = [{"$ref": ref}]
    return out


def generate(roots: list[str]) -> dict[str, Any]:
    defs = _definitions()
    out: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in out or name not in defs:
            continue
        if name in _CUSTOM:
            out[name] = _CUSTOM[name]
            continue
        used: set[str] = set()
        out[name] = _convert(defs[name], used)
        pending += sorted(used - set(out))
    return dict(sorted(out.items()))


def served_roots() -> list[str]:
    sys.path.insert(0, str(Path(__file__).parent.parent / "src"))
    from devkube.server.registry.resources import BUILTIN

    defs = _definitions()
    wanted = {(r.group, r.version, r.kind) for r in BUILTIN}
    roots = []
    for name, node in defs.items():
        for gvk in node.get("x-kubernetes-group-version-kind", []):
            if (gvk["group"], gvk["version"], gvk["kind"]) in wanted:
                roots.append(name)
    return sorted(roots)


def render() -> bytes:
    text = json.dumps(generate(served_roots()), sort_keys=True, separators=(",", ":"))
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def main() -> None:
    OUT.write_bytes(render())


if __name__ == "__main__":
    main()
