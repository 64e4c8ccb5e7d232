"""HTTP routing of Kubernetes REST paths onto `Objects` operations."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from devkube.server.admission import eviction
from devkube.server.endpoints import discovery, logs, streaming, tables
from devkube.server.endpoints.watch import WatchHub, WatchParams
from devkube.server.errors import ApiError, bad_request, method_not_allowed, not_found
from devkube.server.faults import Faults
from devkube.server.registry import patches, scale
from devkube.server.registry.objects import Objects
from devkube.server.registry.resources import ResourceType
from devkube.server.registry.selectors import Selection, parse_field_selector, parse_label_selector
from devkube.server.registry.store import Stored, encode
from devkube.server.registry.strategies import events
from devkube.server.schema import protobuf, structural

DEFAULT_WATCH_TIMEOUT = 1800.0
SUBRESOURCE_VERBS: dict[str, frozenset[str]] = {
    "": frozenset(
        {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
    ),
    "status": frozenset({"get", "update", "patch"}),
    "scale": frozenset({"get", "update", "patch"}),
    "binding": frozenset({"create"}),
    "eviction": frozenset({"create"}),
    "log": frozenset({"get"}),
    **{sub: frozenset({"create"}) for sub in streaming.SUBRESOURCES},
}


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str
    legacy_watch: bool


def json_response(body: Any, status: int = 200) -> web.Response:
    raw = body if isinstance(body, bytes) else encode(body)
    return web.Response(body=raw, status=status, content_type="application/json")


def error_response(error: ApiError) -> web.Response:
    response = json_response(error.status(), error.code)
    response.headers.update(error.headers)
    return response


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


class Handlers:
    def __init__(self, objects: Objects, hub: WatchHub, faults: Faults) -> None:
        self.log_source: logs.LogSource | None = None
        self.stream_backend: streaming.StreamBackend | None = None
        self.objects = objects
        self.hub = hub
        self.faults = faults
        self.registry = objects.registry

    # discovery -------------------------------------------------------------------------------
    async def version(self, request: web.Request) -> web.Response:
        return json_response(discovery.KUBE_VERSION)

    async def api(self, request: web.Request) -> web.Response:
        host = request.host
        return json_response(discovery.core_versions(host))

    async def apis(self, request: web.Request) -> web.Response:
        return json_response(discovery.group_list(self.registry))

    # resources -------------------------------------------------------------------------------
    async def resource(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._resource(request)
        except ApiError as error:
            return error_response(error)

    def _parse(self, request: web.Request) -> tuple[str, str, list[str]]:
        parts = [p for p in request.path.split("/") if p]
        if parts[0] == "api":
            if len(parts) < 2:
                raise not_found("", "", request.path)
            return "", parts[1], parts[2:]
        if len(parts) < 3:
            raise not_found("", "", request.path)
        return parts[1], parts[2], parts[3:]

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        legacy_watch = bool(rest) and rest[0] == "watch"
        if legacy_watch:
            rest = rest[1:]
        rt: ResourceType | None = None
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.registry.get(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                rt, ns, rest = candidate, rest[1], rest[2:]
        if rt is None:
            rt = self.registry.get(group, version, rest[0])
            if rt is None:
                raise _no_route()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and sub not in rt.subresources):
            raise _no_route()
        if rt.namespaced and name is not None and ns is None:
            raise _no_route()
        return Target(rt, ns, name, sub, legacy_watch)

    async def _resource(self, request: web.Request) -> web.StreamResponse:
        group, version, rest = self._parse(request)
        if not rest:
            doc = discovery.resource_list(self.registry, group, version)
            if doc is None or request.method != "GET":
                raise _no_route()
            return json_response(doc)
        target = self._target(group, version, rest)
        q = request.query
        watching = target.legacy_watch or _truthy(q.get("watch"))
        verb = _verb(request.method, target, watching)
        fault_resource = target.rt.plural + (f"/{target.subresource}" if target.subresource else "")
        delay, error = self.faults.decide(verb, fault_resource)
        if delay > 0:
            await asyncio.sleep(delay)
        if error is not None:
            raise error
        if verb not in target.rt.verbs or verb not in SUBRESOURCE_VERBS[target.subresource]:
            what = target.rt.plural + (f"/{target.subresource}" if target.subresource else "")
            raise method_not_allowed(f"{verb} is not supported on {what}")
        dry_run = q.get("dryRun") == "All"
        try:
            fields = structural.FieldValidation.parse(q.get("fieldValidation"))
        except ValueError as exc:
            raise bad_request(str(exc)) from exc
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        if verb in ("list", "watch"):
            return await self._list_or_watch(request, target, watching)
        if verb == "get":
            return await self._get(request, target)
        if verb == "create":
            return await self._create(request, target, dry_run, fields)
        if verb == "update":
            body = await _body(request)
            if sub == "scale":
                stored = self._write_scale(rt, ns, name or "", body, None, dry_run)
                return json_response(scale.view(rt, stored.obj))
            stored = self.objects.update(
                rt, ns, name or "", body, subresource=sub, dry_run=dry_run, fields=fields
            )
            return _warn(self._object(request, rt, stored), fields)
        if verb == "patch":
            return await self._patch(request, target, dry_run, fields)
        if verb == "delete":
            options = await _delete_options(request)
            stored, removed = self.objects.delete(rt, ns, name or "", options, dry_run=dry_run)
            if removed and not _returns_deleted_object(rt):
                return json_response(_success(stored.obj, rt))
            return self._object(request, rt, stored)
        if verb == "deletecollection":
            return await self._delete_collection(request, target, dry_run)
        raise method_not_allowed(f"{request.method} is not supported")

    async def _get(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        q = request.query
        stored = self.objects.get(rt, ns, name or "")
        if sub == "log":
            tail = q.get("tailLines")
            log = logs.LogRequest(
                namespace=ns or "",
                pod=name or "",
                container=q.get("container"),
                follow=_truthy(q.get("follow")),
                tail_lines=int(tail) if tail else None,
                previous=_truthy(q.get("previous")),
            )
            return await logs.serve(request, self.log_source, log)
        if sub == "scale":
            return json_response(scale.view(rt, stored.obj))
        if not sub and tables.wants_table(request.headers.get("Accept", "")):
            # `kubectl get KIND NAME` prints the kind's columns for one object too.
            view = self.objects.view(rt, stored)
            return json_response(tables.table(rt, [view], stored.rv, None, q))
        return self._object(request, rt, stored)

    async def _create(
        self,
        request: web.Request,
        target: Target,
        dry_run: bool,
        fields: structural.FieldValidation,
    ) -> web.StreamResponse:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        # (Access reviews and TokenRequest are answered by reviews.py, routed before this.)
        if sub in streaming.SUBRESOURCES:
            stored = self.objects.get(rt, ns, name or "")
            pod = self.objects.view(rt, stored)
            return await streaming.serve(request, self.stream_backend, sub, ns or "", pod)
        body = await _body(request)
        if sub == "binding":
            self.objects.bind(ns or "", name or "", body)
            return json_response(_success(), 201)
        if sub == "eviction":
            refused = eviction.evict(self.objects, rt, ns or "", name or "", body, dry_run=dry_run)
            if refused is not None:
                return json_response(refused, int(refused["code"]))
            return json_response(_success(), 201)
        if name is not None:
            raise method_not_allowed("POST is not allowed on a named object")
        stored = self.objects.create(rt, ns, body, dry_run=dry_run, fields=fields)
        return _warn(self._object(request, rt, stored, 201), fields)

    async def _patch(
        self,
        request: web.Request,
        target: Target,
        dry_run: bool,
        fields: structural.FieldValidation,
    ) -> web.StreamResponse:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        q = request.query
        content_type = request.content_type
        if content_type not in patches.PATCH_TYPES:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - {content_type}",
            )
        body = await _body(request, yaml_ok=content_type == patches.APPLY_PATCH)
        if sub == "scale":
            stored = self._write_scale(rt, ns, name or "", body, content_type, dry_run)
            return json_response(scale.view(rt, stored.obj))
        existed = self.objects.store.get(rt.storage_key, ns or "", name or "") is not None
        stored = self.objects.patch(
            rt,
            ns,
            name or "",
            content_type,
            body,
            subresource=sub,
            dry_run=dry_run,
            force=_truthy(q.get("force")),
            fields=fields,
        )
        return _warn(self._object(request, rt, stored, 200 if existed else 201), fields)

    async def _delete_collection(
        self, request: web.Request, target: Target, dry_run: bool
    ) -> web.StreamResponse:
        rt = target.rt
        options = await _delete_options(request)
        selection = self._selection(request, target)
        deleted = []
        for stored in self.objects.list(rt, selection):
            meta = stored.obj["metadata"]
            final, _ = self.objects.delete(
                rt, meta.get("namespace"), meta["name"], options, dry_run=dry_run
            )
            deleted.append(final)
        return json_response(self._list_bytes(rt, deleted, self.objects.store.rv, None))

    def _write_scale(
        self,
        rt: ResourceType,
        ns: str | None,
        name: str,
        body: Any,
        content_type: str | None,
        dry_run: bool,
    ) -> Stored:
        current = self.objects.get(rt, ns, name)
        wanted = body
        if content_type is not None:
            wanted = self._patched_scale(scale.view(rt, current.obj), content_type, body)
        obj = scale.apply(rt, current.obj, wanted)
        return self.objects.replace(rt, current, obj, dry_run=dry_run)

    def _patched_scale(self, view: dict[str, Any], content_type: str, body: Any) -> Any:
        if content_type == patches.JSON_PATCH:
            return patches.json_patch(view, body)
        if content_type == patches.STRATEGIC_PATCH:
            return patches.strategic_merge(view, body)
        return patches.merge_patch(view, body)

    def _object(
        self, request: web.Request, rt: ResourceType, stored: Stored, status: int = 200
    ) -> web.Response:
        return json_response(self.objects.raw(rt, stored), status)

    def _selection(self, request: web.Request, target: Target) -> Selection:
        q = request.query
        alias = events.field_alias if target.rt.group == events.GROUP else (lambda path: path)
        fields = parse_field_selector(q.get("fieldSelector"), target.rt.plural, alias)
        if target.legacy_watch and target.name is not None:
            fields = parse_field_selector(f"metadata.name={target.name}", target.rt.plural)
        return Selection(target.namespace, parse_label_selector(q.get("labelSelector")), fields)

    async def _list_or_watch(
        self, request: web.Request, target: Target, watching: bool
    ) -> web.StreamResponse:
        rt = target.rt
        q = request.query
        selection = self._selection(request, target)
        if watching:
            rv = q.get("resourceVersion")
            send_initial = _truthy(q.get("sendInitialEvents"))
            bookmarks = _truthy(q.get("allowWatchBookmarks"))
            if send_initial and (not bookmarks or q.get("resourceVersionMatch") != "NotOlderThan"):
                raise ApiError(
                    422,
                    "Invalid",
                    "sendInitialEvents requires allowWatchBookmarks=true and "
                    "resourceVersionMatch=NotOlderThan",
                )
            initial = None
            if send_initial or rv in (None, "", "0"):
                initial = functools.partial(self.objects.list, rt, selection)
            timeout = float(q.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
            params = WatchParams(rv, bookmarks, timeout, send_initial)
            query = request.query
            as_table = tables.wants_table(request.headers.get("Accept", ""))

            def render(stored: Stored) -> bytes:
                if as_table:
                    view = self.objects.view(rt, stored)
                    return encode(tables.table(rt, [view], stored.rv, None, query))
                return self.objects.raw(rt, stored)

            return await self.hub.serve(request, rt, selection, params, initial, render)
        items = self.objects.list(rt, selection)
        list_rv = self.objects.store.rv
        limit = int(q.get("limit") or 0)
        token = q.get("continue")
        next_token = None
        if token:
            try:
                state = json.loads(base64.urlsafe_b64decode(token.encode()))
                start, list_rv = tuple(state["start"]), int(state["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise bad_request("invalid continue token") from exc
            items = [s for s in items if _sort_key(s) > start]
        remaining = None
        if limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            state = {"rv": list_rv, "start": list(_sort_key(items[-1]))}
            next_token = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        if tables.wants_table(request.headers.get("Accept", "")):
            return json_response(
                tables.table(
                    rt,
                    [self.objects.view(rt, s) for s in items],
                    list_rv,
                    next_token,
                    request.query,
                )
            )
        return json_response(self._list_bytes(rt, items, list_rv, next_token, remaining))

    def _list_bytes(
        self,
        rt: ResourceType,
        items: list[Stored],
        rv: int,
        token: str | None,
        remaining: int | None = None,
    ) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = encode({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})
        raws = [self.objects.raw(rt, s) for s in items]
        return head[:-1] + b',"items":[' + b",".join(raws) + b"]}"

    # fault switchboard -----------------------------------------------------------------------
    async def get_faults(self, request: web.Request) -> web.Response:
        return json_response(self.faults.to_json())

    async def put_faults(self, request: web.Request) -> web.Response:
        try:
            doc = await request.json()
        except ValueError:
            return error_response(bad_request("faults body must be JSON"))
        if not isinstance(doc, dict):
            return error_response(bad_request("faults body must be an object"))
        self.faults.load_json(doc)
        return json_response(self.faults.to_json())

    async def drop_watches(self, request: web.Request) -> web.Response:
        return json_response({"dropped": self.faults.drop_watches()})


def _warn(response: web.Response, fields: structural.FieldValidation) -> web.Response:
    """One ``Warning`` header per dropped field, as the real server sends under ``Warn``."""
    for text in fields.warnings:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


def _no_route() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def _verb(method: str, target: Target, watching: bool) -> str:
    if target.subresource in streaming.SUBRESOURCES and method in ("GET", "POST"):
        return streaming.verb(method)
    if method == "GET":
        if target.name is None or watching:
            return "watch" if watching else "list"
        return "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name is not None else "deletecollection"
    raise method_not_allowed(f"method {method} is not allowed")


def _sort_key(stored: Stored) -> tuple[str, str]:
    meta = stored.obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


PROTOBUF = "application/vnd.kubernetes.protobuf"
CBOR = "application/cbor"


#: libyaml's loader where PyYAML was built with it: the pure-Python one takes a second or more
#: of CPU for a large CRD, and kubectl sends every server-side apply as a YAML patch.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml(raw: bytes) -> Any:
    """A YAML body. kubectl sends its server-side apply patches as JSON (which is YAML): the
    JSON parser reads those alike, in a fraction of the time; a flow mapping that is not JSON
    (`{a: b}`) falls through to the YAML parser."""
    if raw.lstrip()[:1] in (b"{", b"["):
        with contextlib.suppress(ValueError):
            return json.loads(raw)
    return yaml.load(raw, Loader=_YAML_LOADER)


async def _body(request: web.Request, *, yaml_ok: bool = False) -> Any:
    if request.content_type in (PROTOBUF, CBOR):
        # Typed Go clients (`kubectl create pdb|quota|job|...`) send protobuf: every built-in
        # kind is decoded (protobuf.py); anything else is refused the standard way.
        try:
            if request.content_type == PROTOBUF:
                return protobuf.decode(await request.read())
            raise protobuf.ProtobufError("CBOR is not supported")
        except protobuf.ProtobufError as exc:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                f"application/json, application/yaml ({exc}; use `kubectl apply -f`)",
            ) from exc
    raw = await request.read()
    if not raw:
        return None
    try:
        if yaml_ok or request.content_type == "application/yaml":
            return _yaml(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"the request body is not valid: {exc}") from exc


async def _delete_options(request: web.Request) -> dict[str, Any]:
    body = await _body(request)
    options: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
    q = request.query
    if "gracePeriodSeconds" in q:
        options["gracePeriodSeconds"] = int(q["gracePeriodSeconds"])
    if "propagationPolicy" in q:
        options["propagationPolicy"] = q["propagationPolicy"]
    if "orphanDependents" in q:
        options["orphanDependents"] = _truthy(q["orphanDependents"])
    return options


def _returns_deleted_object(rt: ResourceType) -> bool:
    """Kinds whose real registry answers DELETE with the object rather than a Status."""
    return rt.builtin and rt.group == "" and rt.plural in ("pods", "services", "namespaces")


def _success(obj: dict[str, Any] | None = None, rt: ResourceType | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    }
    if obj is not None and rt is not None:
        meta = obj["metadata"]
        details = {"name": meta["name"], "kind": rt.plural, "uid": meta.get("uid")}
        if rt.group:
            details["group"] = rt.group
        status["details"] = details
    return status
