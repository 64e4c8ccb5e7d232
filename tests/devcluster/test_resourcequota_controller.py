"""The dev cluster's quota controller with a quota stored before the API refused its spec:
it is skipped (logged once per version) and the namespace's other quotas are still counted.

Driven without a server: the quota informer's cache is filled by hand and a fake client
answers the pod list and records the status writes.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from devkube.controllers.resourcequota import ResourceQuotaController
from devkube.machinery.client import ApiClient, WatchEvent
from devkube.machinery.discovery import Discovery
from devkube.machinery.informer import Informer


class Client:
    def __init__(self) -> None:
        self.writes: list[tuple[str, dict[str, Any]]] = []

    async def list(self, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append((path, body))
        return body


def quota(name: str, rv: str, hard: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv}
    return {"metadata": meta, "spec": {"hard": hard}}


@pytest.mark.asyncio
async def test_a_stored_quota_that_does_not_parse_is_skipped_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = Client()
    api: Any = fake
    client: ApiClient = api
    quotas = Informer(client, "/api/v1/resourcequotas")
    controller = ResourceQuotaController(
        client, Discovery(client), pods=Informer(client, "/api/v1/pods"), quotas=quotas
    )
    quotas.apply(WatchEvent("ADDED", quota("bad", "1", {"cpu": "lots"})))
    quotas.apply(WatchEvent("ADDED", quota("good", "2", {"requests.cpu": "1"})))
    with caplog.at_level(logging.WARNING, logger="devkube.controllers.resourcequota"):
        await controller.sync()
        await controller.sync()
        assert [r.getMessage() for r in caplog.records] == [
            "resource quota ns/bad skipped: spec.hard: not a quantity: 'lots'"
        ]
        written = [path for path, _ in fake.writes]
        assert written == ["/api/v1/namespaces/ns/resourcequotas/good/status"] * 2
        assert fake.writes[0][1]["status"] == {
            "hard": {"requests.cpu": "1"},
            "used": {"requests.cpu": "0"},
        }
        # A new version of the bad quota (still bad) is logged again, once.
        quotas.apply(WatchEvent("MODIFIED", quota("bad", "3", {"cpu": "more"})))
        await controller.sync()
        assert len(caplog.records) == 2
