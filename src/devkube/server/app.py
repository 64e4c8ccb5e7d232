"""`ApiServer`: the aiohttp application, its TLS listener and its background chores."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from devkube.machinery.kubeconfig import kubeconfig_dict
from devkube.server.admission.access import create_on_update, rbac_escalation, service_accounts
from devkube.server.admission.limitranges import (
    default_limit_range,
    limit_ranger_defaults,
    limit_ranger_validate,
)
from devkube.server.admission.podsecurity import pod_security
from devkube.server.admission.quota import resource_quota
from devkube.server.admission.tolerations import default_tolerations
from devkube.server.auth import rbacpolicy
from devkube.server.auth.middleware import Authenticator, auth_middleware
from devkube.server.auth.rbac import Authorizer
from devkube.server.auth.reviews import Reviews
from devkube.server.auth.tokens import TokenIssuer
from devkube.server.endpoints import openapi
from devkube.server.endpoints.handlers import Handlers
from devkube.server.endpoints.logs import LogSource
from devkube.server.endpoints.streaming import StreamBackend
from devkube.server.endpoints.watch import WatchHub
from devkube.server.faults import Faults
from devkube.server.registry.objects import NS_KEY, Objects
from devkube.server.registry.resources import Registry
from devkube.server.registry.store import Change, Store
from devkube.server.tls import make_serving_tls

DEFAULT_SERVICE_ACCOUNT = "default"


class ApiServer:
    """An in-memory Kubernetes API server over HTTPS with bearer-token auth and RBAC.

    `token` is the admin credential (user kubernetes-admin in system:masters, what the
    kubeconfig carries); ServiceAccount tokens come from the TokenRequest API. Every
    namespace gets a `default` ServiceAccount, as kube's service account controller makes.

    `history_size` bounds the per-resource change history watches can resume from;
    `watch_queue_size` bounds each watcher's backlog before it is cut with a 410.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        faults: Faults | None = None,
        extra_sans: Iterable[str] = (),
        *,
        history_size: int = 10000,
        watch_queue_size: int = 10000,
        bookmark_interval: float = 5.0,
        seed: int | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token or secrets.token_urlsafe(24)
        self.faults = faults or Faults()
        self.extra_sans = tuple(extra_sans)
        # More addresses to serve on, with the same port (a pod network's gateway).
        self.also_listen: tuple[str, ...] = ()
        self.registry = Registry()
        self.store = Store(history_size=history_size, watch_queue_size=watch_queue_size)
        self.objects = Objects(self.store, self.registry, rng=random.Random(seed))
        self.hub = WatchHub(self.store, bookmark_interval)
        self.faults.on_drop(self.hub.drop_all)
        self.faults.on_expire(self.store.expire_history)
        self._handlers = Handlers(self.objects, self.hub, self.faults)
        self.issuer = TokenIssuer()
        self.authorizer = Authorizer(self.store)
        self.authenticator = Authenticator(self.token, self.issuer, self.store)
        self.reviews = Reviews(self.store, self.authorizer, self.issuer)
        self.objects.admission += [
            service_accounts(self.store),
            default_tolerations,
            rbac_escalation(self.authorizer),
            create_on_update(self.authorizer),
            default_limit_range,
            limit_ranger_defaults(self.store),
        ]
        # kube's order: LimitRanger, PodSecurity, then ResourceQuota, always last.
        self.objects.validating += [
            limit_ranger_validate(self.store),
            pod_security(self.store),
            resource_quota(self.store),
        ]
        self._bootstrap_rbac()
        self.store.on_change(NS_KEY, self._namespace_changed)
        self.store.on_change("serviceaccounts", self._account_changed)
        for stored in list(self.store.iter(NS_KEY, None)):
            self._ensure_default_account(stored.obj["metadata"]["name"])
        self.ca_pem = b""
        self._runner: web.AppRunner | None = None
        self._chores: list[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    @property
    def log_source(self) -> LogSource | None:
        """Where GET pods/<name>/log reads from; a kubelet runtime that runs real processes
        sets it (kubectl logs then works), otherwise log requests answer 400."""
        return self._handlers.log_source

    @log_source.setter
    def log_source(self, source: LogSource | None) -> None:
        self._handlers.log_source = source

    def _bootstrap_rbac(self) -> None:
        roles = self.registry.get("rbac.authorization.k8s.io", "v1", "clusterroles")
        bindings = self.registry.get("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
        assert roles is not None and bindings is not None
        for role in rbacpolicy.cluster_roles():
            self.objects.create(roles, None, role)
        for binding in rbacpolicy.cluster_role_bindings():
            self.objects.create(bindings, None, binding)

    def _namespace_changed(self, change: Change) -> None:
        if change.type == "ADDED":
            self._ensure_default_account(change.new.obj["metadata"]["name"])

    def _account_changed(self, change: Change) -> None:
        meta = change.new.obj["metadata"]
        if change.type == "DELETED" and meta["name"] == DEFAULT_SERVICE_ACCOUNT:
            self._ensure_default_account(str(meta.get("namespace") or ""))

    def _ensure_default_account(self, namespace: str) -> None:
        """What kube's service account controller keeps: `default` in every live namespace."""
        ns = self.store.get(NS_KEY, "", namespace)
        if ns is None or ns.obj["metadata"].get("deletionTimestamp"):
            return
        if self.store.get("serviceaccounts", namespace, DEFAULT_SERVICE_ACCOUNT) is not None:
            return
        accounts = self.registry.get("", "v1", "serviceaccounts")
        assert accounts is not None
        self.objects.create(accounts, namespace, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})

    @property
    def stream_backend(self) -> StreamBackend | None:
        """What serves pods/exec, attach and portforward (the kubelet's runtime); without
        one those requests answer 400."""
        return self._handlers.stream_backend

    @stream_backend.setter
    def stream_backend(self, backend: StreamBackend | None) -> None:
        self._handlers.stream_backend = backend

    def app(self) -> web.Application:
        handlers = self._handlers
        app = web.Application(
            middlewares=[auth_middleware(self.authenticator, self.authorizer)],
            client_max_size=64 * 1024**2,
        )
        self.reviews.routes(app)
        ok = self._ok
        app.router.add_get("/healthz", ok)
        app.router.add_get("/readyz", ok)
        app.router.add_get("/livez", ok)
        app.router.add_get("/version", handlers.version)
        app.router.add_get("/api", handlers.api)
        app.router.add_get("/apis", handlers.apis)
        app.router.add_get("/openapi/v2", openapi.v2_handler(self.registry))
        app.router.add_get("/openapi/v3", openapi.v3_index_handler(self.registry))
        app.router.add_get("/openapi/v3/{path:.*}", openapi.v3_handler(self.registry))
        app.router.add_get("/devcluster/faults", handlers.get_faults)
        app.router.add_put("/devcluster/faults", handlers.put_faults)
        app.router.add_post("/devcluster/faults/drop-watches", handlers.drop_watches)
        app.router.add_route("*", "/api/{tail:.*}", handlers.resource)
        app.router.add_route("*", "/apis/{tail:.*}", handlers.resource)
        return app

    async def _ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def start(self) -> None:
        tls = make_serving_tls(self.extra_sans)
        self.ca_pem = tls.ca_pem
        # handler_cancellation: a watch whose client went away is cancelled (and unregistered)
        # at once instead of lingering until its next event.
        self._runner = web.AppRunner(
            self.app(), handle_signals=False, access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=tls.context)
        await site.start()
        if self.port == 0:
            self.port = int(self._runner.addresses[0][1])
        for host in self.also_listen:
            await web.TCPSite(self._runner, host, self.port, ssl_context=tls.context).start()
        self._chores.append(asyncio.create_task(self._drop_watches_periodically()))

    async def stop(self) -> None:
        for task in self._chores:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._chores.clear()
        self.hub.drop_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _drop_watches_periodically(self) -> None:
        while True:
            every = self.faults.drop_watches_every
            await asyncio.sleep(every if every else 0.2)
            if every and self.faults.drop_watches_every == every:
                self.faults.drop_watches()

    def kubeconfig_dict(
        self, context: str = "dev", *, token: str | None = None, namespace: str = "default"
    ) -> dict[str, Any]:
        """A kubeconfig for this server: the admin's, or with `token` (a ServiceAccount's)."""
        return kubeconfig_dict(
            self.url, self.ca_pem, token or self.token, context=context, namespace=namespace
        )
