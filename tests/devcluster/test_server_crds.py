"""CRDs registered at run time: serving, schema defaults and pruning, status and scale."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from devkube.server import ApiServer
from tests.harness.cluster import client_ssl_context
from tests.harness.manifests import crd

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"


def widget_crd(scope: str = "Namespaced") -> dict[str, Any]:
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    return crd(
        "widgets",
        "Widget",
        scope=scope,
        subresources={"status": {}, "scale": scale},
        shortNames=["wd"],
        schema={
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "color": {"type": "string"},
                        "parts": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "size": {"type": "integer", "default": 3},
                                },
                            },
                        },
                        "free": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        },
                    },
                },
                "status": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        },
    )


class Api:
    def __init__(self, server: ApiServer, session: aiohttp.ClientSession) -> None:
        self.server, self.session = server, session
        self.ssl = client_ssl_context(server)

    async def __call__(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.server.token}", "Content-Type": ctype}
        async with self.session.request(
            method,
            self.server.url + path,
            headers=headers,
            ssl=self.ssl,
            data=None if body is None else json.dumps(body),
        ) as resp:
            return resp.status, await resp.json()


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    srv = ApiServer()
    await srv.start()
    async with aiohttp.ClientSession() as session:
        yield Api(srv, session)
    await srv.stop()


async def test_crd_is_established_and_serves_its_resource(api: Api) -> None:
    status, crd = await api("POST", CRDS, widget_crd())
    assert status == 201
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["listKind"] == "WidgetList"
    _, resources = await api("GET", "/apis/example.com/v1")
    names = {r["name"]: r for r in resources["resources"]}
    assert (
        names["widgets"]["shortNames"] == ["wd"]
        and "widgets/status" in names
        and "widgets/scale" in names
    )
    _, groups = await api("GET", "/apis")
    assert "example.com" in {g["name"] for g in groups["groups"]}
    status, listed = await api("GET", WIDGETS)
    assert status == 200 and listed["kind"] == "WidgetList" and listed["items"] == []


async def test_defaults_and_pruning_on_create_and_update(api: Api) -> None:
    await api("POST", CRDS, widget_crd())
    body = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {
            "color": "red",
            "unknown": 1,
            "parts": [{"name": "p"}],
            "free": {"any": {"thing": 1}},
        },
        "extra": True,
    }
    status, created = await api("POST", WIDGETS, body)
    assert status == 201
    assert created["spec"] == {
        "color": "red",
        "replicas": 1,
        "parts": [{"name": "p", "size": 3}],
        "free": {"any": {"thing": 1}},
    }
    assert "extra" not in created
    created["spec"]["parts"].append({"name": "q", "junk": 1})
    _, updated = await api("PUT", f"{WIDGETS}/w", created)
    assert updated["spec"]["parts"][1] == {"name": "q", "size": 3}
    assert updated["metadata"]["generation"] == 2


async def test_status_subresource_is_separate_and_generation_tracks_spec(api: Api) -> None:
    await api("POST", CRDS, widget_crd())
    body = {"metadata": {"name": "w"}, "spec": {}, "status": {"ignored": True}}
    _, created = await api("POST", WIDGETS, body)
    assert "status" not in created
    created["status"] = {"replicas": 4}
    _, main = await api("PUT", f"{WIDGETS}/w", created)
    assert "status" not in main and main["metadata"]["generation"] == 1
    _, st = await api("PUT", f"{WIDGETS}/w/status", {**created, "spec": {"replicas": 9}})
    assert st["status"] == {"replicas": 4} and st["spec"]["replicas"] == 1
    assert st["metadata"]["generation"] == 1
    status, scale = await api("GET", f"{WIDGETS}/w/scale")
    assert status == 200 and scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 1 and scale["status"]["replicas"] == 4
    status, scale = await api(
        "PATCH", f"{WIDGETS}/w/scale", {"spec": {"replicas": 5}}, "application/merge-patch+json"
    )
    assert status == 200 and scale["spec"]["replicas"] == 5
    _, after = await api("GET", f"{WIDGETS}/w")
    assert after["spec"]["replicas"] == 5 and after["metadata"]["generation"] == 2


async def test_strategic_merge_is_unsupported_for_custom_resources(api: Api) -> None:
    await api("POST", CRDS, widget_crd())
    await api("POST", WIDGETS, {"metadata": {"name": "w"}, "spec": {}})
    status, body = await api(
        "PATCH", f"{WIDGETS}/w", {"spec": {"color": "b"}}, "application/strategic-merge-patch+json"
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_cluster_scoped_crd_and_deletion_stops_serving(api: Api) -> None:
    await api("POST", CRDS, widget_crd("Cluster"))
    status, _ = await api(
        "POST", "/apis/example.com/v1/widgets", {"metadata": {"name": "w"}, "spec": {}}
    )
    assert status == 201
    status, got = await api("GET", "/apis/example.com/v1/widgets/w")
    assert status == 200 and "namespace" not in got["metadata"]
    status, _ = await api("DELETE", f"{CRDS}/widgets.example.com")
    assert status == 200
    status, _ = await api("GET", "/apis/example.com/v1/widgets")
    assert status == 404
    # recreated, it starts empty
    await api("POST", CRDS, widget_crd("Cluster"))
    _, listed = await api("GET", "/apis/example.com/v1/widgets")
    assert listed["items"] == []


async def test_invalid_crd_is_rejected(api: Api) -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "wrong.example.com"
    status, body = await api("POST", CRDS, crd)
    assert (status, body["reason"]) == (422, "Invalid")
