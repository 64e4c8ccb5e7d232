"""Just enough OpenAPI for kubectl.

kubectl 1.37 reads `/openapi/v3` to learn whether the server validates fields itself (the
PATCH operation of a kind lists a `fieldValidation` query parameter). When it does, kubectl
skips client-side schema validation and sends `fieldValidation=Strict`. Custom resources' schemas
are published as the real server publishes them (`components.schemas`, named by reversed group,
version and kind, tagged with `x-kubernetes-group-version-kind`), which is what `kubectl explain`
reads; built-in kinds carry operations and parameters but no schemas. PATCH operations
deliberately declare no request media types: kubectl then computes apply patches from its
compiled-in types (strategic merge for built-in kinds) or as JSON merge patches (custom
resources), as with schema-less servers.
`/openapi/v2` answers 404, which clients treat as "no OpenAPI v2".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .resources import Registry, ResourceType

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _operation(rt: ResourceType, verb: str) -> dict[str, Any]:
    return {
        "operationId": f"{verb}{rt.kind}",
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": {
            "group": rt.group,
            "version": rt.version,
            "kind": rt.kind,
        },
        "parameters": [
            {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
            for name in _QUERY_PARAMS
        ],
        "responses": {"200": {"description": "OK"}},
    }


def gv_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    prefix = "/" + _gv_path(group, version)
    for rt in types:
        scope = (
            f"{prefix}/namespaces/{{namespace}}/{rt.plural}"
            if rt.namespaced
            else f"{prefix}/{rt.plural}"
        )
        paths[scope] = {"get": _operation(rt, "list"), "post": _operation(rt, "post")}
        paths[scope + "/{name}"] = {
            "get": _operation(rt, "get"),
            "put": _operation(rt, "put"),
            "patch": _operation(rt, "patch"),
            "delete": _operation(rt, "delete"),
        }
    schemas: dict[str, Any] = {}
    for rt in types:
        if rt.schema:
            schemas[schema_name(rt)] = {
                **rt.schema,
                "x-kubernetes-group-version-kind": [
                    {"group": rt.group, "version": rt.version, "kind": rt.kind}
                ],
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (devcluster)", "version": "v1.37.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def schema_name(rt: ResourceType) -> str:
    """``io.ray.v1.RayCluster`` for ray.io/v1 RayCluster, as kube-apiserver names it."""
    group = ".".join(reversed(rt.group.split(".")))
    return f"{group}.{rt.version}.{rt.kind}"


def _hash(doc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def v3_index_handler(registry: Registry) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        paths = {}
        gvs = [("", "v1")] + [(g, v) for g in registry.groups() for v in registry.versions_of(g)]
        for group, version in gvs:
            doc = gv_document(registry, group, version)
            if doc is not None:
                path = _gv_path(group, version)
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(doc)}"}
        return web.json_response({"paths": paths})

    return handler


def v3_handler(registry: Registry) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        parts = request.match_info["path"].strip("/").split("/")
        doc = None
        if len(parts) == 2 and parts[0] == "api":
            doc = gv_document(registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = gv_document(registry, parts[1], parts[2])
        if doc is None:
            return _not_found()
        return web.json_response(doc)

    return handler


def _not_found() -> web.Response:
    return web.json_response(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound",
            "code": 404,
        },
        status=404,
    )


def v2_handler(registry: Registry) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return _not_found()

    return handler
