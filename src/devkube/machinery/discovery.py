"""Which resources the server serves, and where: the map from (apiVersion, kind) to a path.

The garbage collector and `DevCluster.apply` meet arbitrary kinds (including CRDs registered
at run time), so they ask the server's discovery documents like kubectl does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from devkube.machinery.client import ApiClient, ApiError, resource_path


@dataclass(frozen=True)
class ResourceInfo:
    api_version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        return resource_path(
            self.api_version,
            self.plural,
            namespace if self.namespaced else None,
            name,
            subresource,
        )


class Discovery:
    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self._by_kind: dict[tuple[str, str], ResourceInfo] = {}
        self._lock = asyncio.Lock()

    @property
    def resources(self) -> list[ResourceInfo]:
        return list(self._by_kind.values())

    async def refresh(self) -> list[ResourceInfo]:
        async with self._lock:
            found: dict[tuple[str, str], ResourceInfo] = {}
            versions = ["v1"]
            groups = await self._client.get("/apis")
            for group in groups.get("groups") or []:
                versions += [str(v["groupVersion"]) for v in group.get("versions") or []]
            for api_version in versions:
                base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
                try:
                    listing = await self._client.get(base)
                except ApiError:
                    continue  # a group going away between the two requests
                for resource in listing.get("resources") or []:
                    name = str(resource.get("name", ""))
                    if "/" in name:
                        continue  # subresources
                    info = ResourceInfo(
                        api_version,
                        name,
                        str(resource.get("kind", "")),
                        bool(resource.get("namespaced")),
                        frozenset(resource.get("verbs") or ()),
                    )
                    found[(api_version, info.kind)] = info
            self._by_kind = found
            return list(found.values())

    def lookup(self, api_version: str, kind: str) -> ResourceInfo | None:
        return self._by_kind.get((api_version, kind))

    async def resolve(self, api_version: str, kind: str) -> ResourceInfo:
        """The resource for a kind, refreshing discovery once when it is not known yet."""
        info = self.lookup(api_version, kind)
        if info is None:
            await self.refresh()
            info = self.lookup(api_version, kind)
        if info is None:
            raise LookupError(f"the server does not serve {kind} in {api_version}")
        return info
