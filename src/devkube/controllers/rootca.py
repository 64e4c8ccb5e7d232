"""The root CA publisher, as kube-controller-manager runs it: every namespace holds a ConfigMap
`kube-root-ca.crt` whose `ca.crt` is the API server's CA, so pods (and the projected
`kube-api-access-*` volume) can verify the server. A deleted or edited copy is put back.

It matters beyond pods: a `count/configmaps` quota charges it, so a namespace's first
ConfigMap is its second on Kubernetes (docs/design.md §8.2 lists the differences this closes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.informer import Informer

NAME = "kube-root-ca.crt"
KEY = "ca.crt"


class RootCAPublisher:
    def __init__(self, client: ApiClient, ca_pem: bytes, *, every: float = 30.0) -> None:
        self._client = client
        self._ca = ca_pem.decode()
        self.namespaces = Informer(client, "/api/v1/namespaces")
        self.configmaps = Informer(
            client, "/api/v1/configmaps", fieldSelector=f"metadata.name={NAME}"
        )
        self._loop = ControlLoop(
            "devcluster root CA publisher",
            self.publish,
            period=every,
            retry_after=1.0,
            failure="publishing kube-root-ca.crt failed",
        )
        self.namespaces.subscribe(self._loop.changed)
        self.configmaps.subscribe(self._loop.changed)

    async def start(self) -> None:
        self.namespaces.start()
        self.configmaps.start()
        await self.namespaces.synced.wait()
        await self.configmaps.synced.wait()
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        await self.namespaces.stop()
        await self.configmaps.stop()

    async def publish(self) -> None:
        for (_, name), namespace in list(self.namespaces.cache.items()):
            if (namespace.get("metadata") or {}).get("deletionTimestamp"):
                continue  # the namespace controller empties it; a create would be refused
            held = self.configmaps.cache.get((name, NAME))
            if held is None:
                await self._create(name)
            elif (held.get("data") or {}).get(KEY) != self._ca:
                await self._fix(name, held)

    async def _create(self, namespace: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": namespace},
            "data": {KEY: self._ca},
        }
        try:
            await self._client.create(resource_path("v1", "configmaps", namespace), body)
        except ApiError as error:
            # 409: made since the cache saw it; 403: the namespace is terminating, or a quota
            # refused it (Kubernetes' publisher retries the same way, on its next sync).
            if error.status not in (403, 409):
                raise

    async def _fix(self, namespace: str, held: Mapping[str, Any]) -> None:
        body = {**held, "data": {**(held.get("data") or {}), KEY: self._ca}}
        with contextlib.suppress(ApiError):  # a conflict: the next event brings it back here
            await self._client.replace(resource_path("v1", "configmaps", namespace, NAME), body)
