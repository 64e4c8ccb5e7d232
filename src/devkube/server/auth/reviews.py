"""The authentication and authorization APIs: TokenRequest, self/subject access reviews,
self rules reviews and self subject reviews (`kubectl create token`, `kubectl auth can-i`,
`kubectl auth can-i --list`, `kubectl auth whoami`).

Each answers for the request's own (possibly impersonated) user, set by the auth middleware;
RBAC has already allowed the request itself (`create serviceaccounts/token`, `create
selfsubjectaccessreviews`, ...).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import yaml
from aiohttp import web

from devkube.server.auth import requestinfo
from devkube.server.auth.identity import ADMIN, UserInfo, current_user
from devkube.server.auth.rbac import Authorizer, Rule
from devkube.server.auth.tokens import (
    API_AUDIENCES,
    DEFAULT_EXPIRATION,
    MIN_EXPIRATION,
    TokenIssuer,
)
from devkube.server.errors import ApiError, bad_request, conflict, not_found
from devkube.server.registry.store import Store, encode
from devkube.server.schema import protobuf
from kubefacts.objects import Obj
from kubefacts.timestamps import rfc3339

AUTHN = "authentication.k8s.io/v1"
AUTHZ = "authorization.k8s.io/v1"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MAX_EXPIRATION = 2**32
ALL_RULES = (
    Rule(("*",), ("*",), ("*",)),
    Rule(("*",), non_resource_urls=("*",)),
)


def _json(body: Obj, status: int = 201) -> web.Response:
    return web.Response(body=encode(body), status=status, content_type="application/json")


def _error(error: ApiError) -> web.Response:
    response = _json(error.status(), error.code)
    response.headers.update(error.headers)
    return response


async def _read(request: web.Request) -> Obj:
    raw = await request.read()
    if not raw:
        return {}
    try:
        if request.content_type == PROTOBUF:
            body: Any = protobuf.decode(raw)
        elif request.content_type == "application/yaml":
            body = yaml.safe_load(raw)
        else:
            body = json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise bad_request(f"the request body is not valid: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the request body must be an object")
    return body


def _user() -> UserInfo:
    return current_user.get() or ADMIN


def _spec(body: Obj) -> Obj:
    spec = body.get("spec")
    return spec if isinstance(spec, dict) else {}


class Reviews:
    """aiohttp handlers for the review kinds and the serviceaccounts/token subresource."""

    def __init__(self, store: Store, authorizer: Authorizer, issuer: TokenIssuer) -> None:
        self.store = store
        self.authorizer = authorizer
        self.issuer = issuer

    def routes(self, app: web.Application) -> None:
        """Registered before the generic resource routes, which they take precedence over."""
        add = app.router.add_post
        add("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", self.token_request)
        add(f"/apis/{AUTHZ}/selfsubjectaccessreviews", self.self_access_review)
        add(f"/apis/{AUTHZ}/subjectaccessreviews", self.subject_access_review)
        add(f"/apis/{AUTHZ}/selfsubjectrulesreviews", self.self_rules_review)
        add(f"/apis/{AUTHN}/selfsubjectreviews", self.self_subject_review)

    # --- TokenRequest ------------------------------------------------------------------

    async def token_request(self, request: web.Request) -> web.Response:
        try:
            return _json(await self._token_request(request))
        except ApiError as error:
            return _error(error)

    async def _token_request(self, request: web.Request) -> Obj:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        body = await _read(request)
        account = self.store.get("serviceaccounts", namespace, name)
        if account is None:
            raise not_found("serviceaccounts", "", name)
        spec = _spec(body)
        seconds = int(spec.get("expirationSeconds") or DEFAULT_EXPIRATION)
        if seconds < MIN_EXPIRATION or seconds > MAX_EXPIRATION:
            why = (
                "may not specify a duration less than 10 minutes"
                if seconds < MIN_EXPIRATION
                else "may not specify a duration larger than 2^32 seconds"
            )
            raise ApiError(
                422,
                "Invalid",
                f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
                f"spec.expirationSeconds: Invalid value: {seconds}: {why}",
                details={
                    "name": name,
                    "group": "authentication.k8s.io",
                    "kind": "TokenRequest",
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": f"Invalid value: {seconds}: {why}",
                            "field": "spec.expirationSeconds",
                        }
                    ],
                },
            )
        audiences = tuple(str(a) for a in spec.get("audiences") or ()) or API_AUDIENCES
        bound = spec.get("boundObjectRef") or None
        pod: tuple[str, str] | None = None
        if isinstance(bound, dict) and bound:
            kind, ref_name = bound.get("kind"), str(bound.get("name") or "")
            if kind != "Pod":
                raise bad_request(f"cannot bind token for object of type {kind}")
            stored = self.store.get("pods", namespace, ref_name)
            if stored is None:
                raise not_found("pods", "", ref_name)
            uid = str(stored.obj["metadata"].get("uid"))
            if bound.get("uid") and bound.get("uid") != uid:
                raise conflict(
                    "pods",
                    "",
                    ref_name,
                    f"the UID in the bound object reference ({bound.get('uid')}) does not match "
                    f"the UID in record. The object might have been deleted and then recreated",
                )
            pod = (ref_name, uid)
            bound = {"kind": "Pod", "apiVersion": "v1", "name": ref_name, "uid": uid}
        issued = self.issuer.issue(
            namespace=namespace,
            name=name,
            sa_uid=str(account.obj["metadata"].get("uid")),
            audiences=audiences,
            expiration_seconds=seconds,
            pod=pod,
        )
        out_spec: Obj = {"audiences": list(audiences), "expirationSeconds": seconds}
        if bound:
            out_spec["boundObjectRef"] = bound
        return {
            "kind": "TokenRequest",
            "apiVersion": AUTHN,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": None},
            "spec": out_spec,
            "status": {
                "token": issued.token,
                "expirationTimestamp": rfc3339(datetime.fromtimestamp(issued.expires, UTC)),
            },
        }

    # --- access reviews ----------------------------------------------------------------

    def _decide(self, user: UserInfo, spec: Obj) -> Obj:
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        if isinstance(resource, dict):
            attrs = requestinfo.Attributes(
                verb=str(resource.get("verb") or ""),
                resource_request=True,
                api_group=str(resource.get("group") or ""),
                api_version=str(resource.get("version") or ""),
                namespace=str(resource.get("namespace") or ""),
                resource=str(resource.get("resource") or ""),
                subresource=str(resource.get("subresource") or ""),
                name=str(resource.get("name") or ""),
            )
        elif isinstance(non_resource, dict):
            attrs = requestinfo.Attributes(
                verb=str(non_resource.get("verb") or ""),
                resource_request=False,
                path=str(non_resource.get("path") or ""),
            )
        else:
            raise ApiError(
                422,
                "Invalid",
                "spec.resourceAttributes: Invalid value: exactly one of nonResourceAttributes "
                "or resourceAttributes must be specified",
            )
        if user.privileged:
            return {"allowed": True}
        allowed, reason = self.authorizer.authorize(user, attrs)
        status: Obj = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return status

    async def self_access_review(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request)
            spec = _spec(body)
            return _json(self._review(body, "SelfSubjectAccessReview", self._decide(_user(), spec)))
        except ApiError as error:
            return _error(error)

    async def subject_access_review(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request)
            spec = _spec(body)
            if not spec.get("user") and not spec.get("groups"):
                raise ApiError(
                    422,
                    "Invalid",
                    'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: '
                    'Invalid value: "": at least one of user or group must be specified',
                )
            subject = UserInfo(
                str(spec.get("user") or ""),
                tuple(str(g) for g in spec.get("groups") or ()),
                str(spec.get("uid") or ""),
            )
            return _json(self._review(body, "SubjectAccessReview", self._decide(subject, spec)))
        except ApiError as error:
            return _error(error)

    async def self_rules_review(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request)
            namespace = str(_spec(body).get("namespace") or "")
            user = _user()
            resolved = self.authorizer.resolve(user, namespace)
            rules = [rule for rule, _ in resolved.rules]
            if user.privileged:
                rules = [*ALL_RULES, *rules]
            status: Obj = {
                "resourceRules": [_resource_rule(r) for r in rules if r.resources],
                "nonResourceRules": [
                    {"verbs": list(r.verbs), "nonResourceURLs": list(r.non_resource_urls)}
                    for r in rules
                    if r.non_resource_urls
                ],
                "incomplete": bool(resolved.errors),
            }
            if resolved.errors:
                status["evaluationError"] = "[" + ", ".join(resolved.errors) + "]"
            return _json(self._review(body, "SelfSubjectRulesReview", status))
        except ApiError as error:
            return _error(error)

    async def self_subject_review(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request)
            user = _user()
            info: Obj = {"username": user.name, "groups": list(user.groups)}
            if user.uid:
                info["uid"] = user.uid
            if user.extra:
                info["extra"] = {k: list(v) for k, v in user.extra}
            out = {
                "kind": "SelfSubjectReview",
                "apiVersion": AUTHN,
                "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None},
                "status": {"userInfo": info},
            }
            return _json(out)
        except ApiError as error:
            return _error(error)

    @staticmethod
    def _review(body: Obj, kind: str, status: Obj) -> Obj:
        return {
            "kind": kind,
            "apiVersion": AUTHZ,
            "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None},
            "spec": _spec(body),
            "status": status,
        }


def _resource_rule(rule: Rule) -> Obj:
    out: Obj = {"verbs": list(rule.verbs), "apiGroups": list(rule.api_groups)}
    out["resources"] = list(rule.resources)
    if rule.resource_names:
        out["resourceNames"] = list(rule.resource_names)
    return out
