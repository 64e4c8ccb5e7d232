"""Authentication, impersonation and authorization of every request, in kube-apiserver's order.

1. Authentication (bearer tokens, the one scheme every client we serve can speak): the
   admin token the dev cluster writes into its kubeconfig is user `kubernetes-admin` in
   `system:masters`; a ServiceAccount token this server signed (TokenRequest) is
   `system:serviceaccount:NS:NAME` in `system:serviceaccounts`,
   `system:serviceaccounts:NS`, `system:authenticated`, valid while unexpired, meant for
   this API server's audience, and while its ServiceAccount (same uid) and, for a token bound
   to a pod, its pod (same uid) exist. Anything else is 401 Unauthorized; only /healthz,
   /readyz, /livez and /version answer without a token.
2. Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
   `Impersonate-Extra-*`, i.e. `kubectl --as --as-group`): each header is authorized as verb
   `impersonate` on users / serviceaccounts / groups / uids / userextras, then the request
   runs as the impersonated user.
3. Authorization: system:masters may do anything; everyone else by RBAC (rbac.py) on the
   request's attributes (requestinfo.py), refused with kube's 403 Forbidden message.

The resulting user is set in `identity.current_user` for the handler (and admission).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from multidict import CIMultiDictProxy

from devkube.server.auth import requestinfo
from devkube.server.auth.identity import (
    ADMIN,
    AUTHENTICATED,
    UserInfo,
    current_request,
    current_user,
    service_account_groups,
    service_account_user,
    split_service_account,
)
from devkube.server.auth.rbac import Authorizer, forbidden
from devkube.server.auth.tokens import TokenIssuer
from devkube.server.errors import ApiError, bad_request
from devkube.server.registry.store import Store

ANONYMOUS_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/version"})
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
IMPERSONATE_USER = "Impersonate-User"
IMPERSONATE_GROUP = "Impersonate-Group"
IMPERSONATE_UID = "Impersonate-Uid"
IMPERSONATE_EXTRA = "impersonate-extra-"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def _response(error: ApiError) -> web.Response:
    return web.Response(
        body=json.dumps(error.status()).encode(),
        status=error.code,
        content_type="application/json",
    )


class Authenticator:
    """Bearer token -> user: the admin token, or a ServiceAccount token still backed by its
    ServiceAccount (and pod) in the store."""

    def __init__(self, admin_token: str, issuer: TokenIssuer, store: Store) -> None:
        self._admin = admin_token.encode()
        self.issuer = issuer
        self.store = store
        self._users: dict[str, UserInfo] = {}

    def authenticate(self, header: str) -> UserInfo | None:
        # [process runtime integration] the auth scheme is case-insensitive (RFC 7235): the
        # official client's in-cluster config sends "bearer <token>".
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        token = credentials.strip()
        if hmac.compare_digest(token.encode(), self._admin):
            return ADMIN
        claims = self.issuer.verify(token)
        if claims is None:
            return None
        account = self.store.get("serviceaccounts", claims.namespace, claims.name)
        if account is None:
            return None
        meta = account.obj["metadata"]
        if meta.get("uid") != claims.sa_uid or meta.get("deletionTimestamp"):
            return None
        if claims.pod_name:
            pod = self.store.get("pods", claims.namespace, claims.pod_name)
            if pod is None or pod.obj["metadata"].get("uid") != claims.pod_uid:
                return None
        user = self._users.get(token)
        if user is None:
            extra: dict[str, tuple[str, ...]] = {
                "authentication.kubernetes.io/credential-id": (f"JTI={claims.jti}",)
            }
            if claims.pod_name:
                extra["authentication.kubernetes.io/pod-name"] = (claims.pod_name,)
                extra["authentication.kubernetes.io/pod-uid"] = (claims.pod_uid,)
            user = service_account_user(claims.namespace, claims.name, claims.sa_uid, extra)
            if len(self._users) > 4096:
                self._users.clear()
            self._users[token] = user
        return user


def impersonated(
    user: UserInfo, headers: CIMultiDictProxy[str], authorizer: Authorizer
) -> UserInfo:
    """The user the request acts as: `user` itself unless it asks to impersonate (and may)."""
    name = headers.get(IMPERSONATE_USER)
    groups = tuple(headers.getall(IMPERSONATE_GROUP, ()))
    uid = headers.get(IMPERSONATE_UID, "")
    extra: dict[str, tuple[str, ...]] = {}
    for key in headers:
        if key.lower().startswith(IMPERSONATE_EXTRA):
            extra[key[len(IMPERSONATE_EXTRA) :].lower()] = tuple(headers.getall(key))
    if name is None:
        if groups or uid or extra:
            raise bad_request(
                "requested impersonation of groups, uid or extra without impersonating a user"
            )
        return user
    checks: list[requestinfo.Attributes] = []
    account = split_service_account(name)
    if account is not None:
        checks.append(_impersonate("serviceaccounts", account[1], namespace=account[0]))
    else:
        checks.append(_impersonate("users", name))
    checks += [_impersonate("groups", g) for g in groups]
    if uid:
        checks.append(_impersonate("uids", uid))
    for key, values in extra.items():
        checks += [_impersonate("userextras", v, subresource=key) for v in values]
    for attrs in checks:
        allowed, reason = authorizer.authorize(user, attrs)
        if not allowed:
            raise forbidden(user, attrs, reason)
    if account is not None and not groups:
        groups = service_account_groups(account[0])[:2]
    if name != ANONYMOUS and not {AUTHENTICATED, UNAUTHENTICATED} & set(groups):
        groups = (*groups, AUTHENTICATED)
    return UserInfo(name, groups, uid, tuple(sorted(extra.items())))


def _impersonate(
    resource: str, name: str, *, namespace: str = "", subresource: str = ""
) -> requestinfo.Attributes:
    return requestinfo.Attributes(
        verb="impersonate",
        resource_request=True,
        api_group="authentication.k8s.io" if resource in ("uids", "userextras") else "",
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )


def auth_middleware(authenticator: Authenticator, authorizer: Authorizer) -> Middleware:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in ANONYMOUS_PATHS:
            return await handler(request)
        user = authenticator.authenticate(request.headers.get("Authorization", ""))
        if user is None:
            return _response(unauthorized())
        try:
            if IMPERSONATE_USER in request.headers or IMPERSONATE_GROUP in request.headers:
                user = impersonated(user, request.headers, authorizer)
            attrs = None
            if not user.privileged:
                attrs = requestinfo.attributes(request.method, request.path, request.query)
                allowed, reason = authorizer.authorize(user, attrs)
                if not allowed:
                    raise forbidden(user, attrs, reason)
        except ApiError as error:
            return _response(error)
        token = current_user.set(user)
        request_token = current_request.set(attrs)
        try:
            return await handler(request)
        finally:
            current_request.reset(request_token)
            current_user.reset(token)

    return check
