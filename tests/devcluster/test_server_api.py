"""The dev API server over real HTTPS: discovery, CRUD, selectors, patches, deletion."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from devkube.server import ApiServer
from tests.harness.cluster import client_ssl_context


class Http:
    """A tiny JSON client that keeps status codes visible to assertions."""

    def __init__(self, server: ApiServer, session: aiohttp.ClientSession) -> None:
        self.server = server
        self.session = session
        self.ssl = client_ssl_context(server)

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        token: str | None = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token or self.server.token}"}
        data = None
        if body is not None:
            data = body if isinstance(body, str | bytes) else json.dumps(body)
            headers["Content-Type"] = content_type
        async with self.session.request(
            method, self.server.url + path, data=data, headers=headers, ssl=self.ssl, params=params
        ) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


@pytest.fixture
async def server() -> AsyncIterator[ApiServer]:
    srv = ApiServer(seed=7)
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def http(server: ApiServer) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession() as session:
        yield Http(server, session)


def pod(name: str = "", labels: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": labels or {}, **meta}
    if name:
        metadata["name"] = name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
    }


PODS = "/api/v1/namespaces/default/pods"


async def test_requests_need_the_bearer_token(server: ApiServer, http: Http) -> None:
    status, body = await http.call("GET", PODS, token="wrong")
    assert status == 401
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized"
    async with aiohttp.ClientSession() as session:
        resp = await session.get(server.url + "/healthz", ssl=http.ssl)
        assert resp.status == 200
        resp = await session.get(server.url + "/version", ssl=http.ssl)
        assert (await resp.json())["major"] == "1"
    assert server.url.startswith("https://127.0.0.1:")


async def test_discovery_lists_kinds_and_subresources(http: Http) -> None:
    _, core = await http.call("GET", "/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert by_name["pods"]["namespaced"] and "watch" in by_name["pods"]["verbs"]
    assert by_name["pods"]["shortNames"] == ["po"]
    assert by_name["pods/binding"]["kind"] == "Binding"
    assert by_name["nodes"]["namespaced"] is False
    _, groups = await http.call("GET", "/apis")
    names = {g["name"] for g in groups["groups"]}
    assert {"coordination.k8s.io", "events.k8s.io", "apiextensions.k8s.io"} <= names
    status, _ = await http.call("GET", "/apis/ray.io/v1")
    assert status == 404


async def test_create_get_list_and_metadata_bookkeeping(http: Http) -> None:
    status, created = await http.call("POST", PODS, pod(generateName="w-", labels={"a": "1"}))
    assert status == 201
    meta = created["metadata"]
    assert meta["name"].startswith("w-") and len(meta["name"]) == 7
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
    assert created["status"]["phase"] == "Pending"
    status, again = await http.call("GET", f"{PODS}/{meta['name']}")
    assert status == 200 and again == created
    status, listed = await http.call("GET", PODS)
    assert listed["kind"] == "PodList" and listed["apiVersion"] == "v1"
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    assert [p["metadata"]["name"] for p in listed["items"]] == [meta["name"]]


async def test_errors_are_status_objects(http: Http) -> None:
    await http.call("POST", PODS, pod("a"))
    status, body = await http.call("POST", PODS, pod("a"))
    assert (status, body["reason"], body["details"]["name"]) == (409, "AlreadyExists", "a")
    status, body = await http.call("GET", f"{PODS}/missing")
    assert (status, body["reason"], body["code"]) == (404, "NotFound", 404)
    status, body = await http.call("POST", PODS, pod("Bad_Name"))
    assert (status, body["reason"]) == (422, "Invalid")
    status, body = await http.call("POST", "/api/v1/namespaces/nope/pods", pod("x"))
    assert status == 404 and body["details"]["kind"] == "namespaces"


async def test_stale_resource_version_conflicts_on_put_and_patch(http: Http) -> None:
    _, created = await http.call("POST", PODS, pod("a"))
    fresh = json.loads(json.dumps(created))
    fresh["metadata"]["labels"] = {"v": "2"}
    status, updated = await http.call("PUT", f"{PODS}/a", fresh)
    assert status == 200
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    status, body = await http.call("PUT", f"{PODS}/a", created)  # the old resourceVersion
    assert (status, body["reason"]) == (409, "Conflict")
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    status, _ = await http.call(
        "PATCH", f"{PODS}/a", stale, content_type="application/merge-patch+json"
    )
    assert status == 409


async def test_noop_update_keeps_resource_version(http: Http) -> None:
    _, created = await http.call("POST", PODS, pod("a"))
    _, same = await http.call("PUT", f"{PODS}/a", created)
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_label_and_field_selectors(http: Http) -> None:
    await http.call("POST", PODS, pod("a", {"app": "x", "tier": "1"}))
    await http.call("POST", PODS, pod("b", {"app": "y"}))
    await http.call("POST", PODS, pod("c", {"app": "x", "tier": "2"}))

    async def names(**params: str) -> list[str]:
        status, body = await http.call("GET", PODS, params=params)
        assert status == 200, body
        return [p["metadata"]["name"] for p in body["items"]]

    assert await names(labelSelector="app=x") == ["a", "c"]
    assert await names(labelSelector="app==x,tier!=1") == ["c"]
    assert await names(labelSelector="app in (y, z)") == ["b"]
    assert await names(labelSelector="app notin (x)") == ["b"]
    assert await names(labelSelector="tier") == ["a", "c"]
    assert await names(labelSelector="!tier") == ["b"]
    assert await names(fieldSelector="metadata.name=b") == ["b"]
    assert await names(fieldSelector="status.phase=Pending,metadata.name!=a") == ["b", "c"]
    status, _ = await http.call("GET", PODS, params={"fieldSelector": "spec.bogus=1"})
    assert status == 400


async def test_limit_and_continue_page_through_everything(http: Http) -> None:
    for i in range(5):
        await http.call("POST", PODS, pod(f"p{i}"))
    seen: list[str] = []
    token = ""
    while True:
        params = {"limit": "2"} | ({"continue": token} if token else {})
        _, page = await http.call("GET", PODS, params=params)
        seen += [p["metadata"]["name"] for p in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert seen == [f"p{i}" for i in range(5)]


async def test_pod_binding_and_status_subresource(http: Http) -> None:
    await http.call("POST", PODS, pod("a"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "a"},
        "target": {"kind": "Node", "name": "n1"},
    }
    status, _ = await http.call("POST", f"{PODS}/a/binding", binding)
    assert status == 201
    status, _body = await http.call("POST", f"{PODS}/a/binding", binding)
    assert status == 409
    _, bound = await http.call("GET", f"{PODS}/a")
    assert bound["spec"]["nodeName"] == "n1"
    bound["status"]["phase"] = "Running"
    bound["spec"]["nodeName"] = "elsewhere"  # ignored by the status subresource
    status, after = await http.call("PUT", f"{PODS}/a/status", bound)
    assert status == 200
    assert after["status"]["phase"] == "Running" and after["spec"]["nodeName"] == "n1"
    # the main resource ignores status
    after["status"]["phase"] = "Failed"
    after["metadata"]["labels"] = {"x": "y"}
    _, main = await http.call("PUT", f"{PODS}/a", after)
    assert main["status"]["phase"] == "Running" and main["metadata"]["labels"] == {"x": "y"}
    status, _ = await http.call(
        "PATCH",
        f"{PODS}/a/status",
        {"status": {"phase": "Succeeded"}},
        content_type="application/merge-patch+json",
    )
    assert status == 200
    _, done = await http.call("GET", f"{PODS}/a")
    assert done["status"]["phase"] == "Succeeded"


async def test_pod_spec_is_mostly_immutable(http: Http) -> None:
    _, created = await http.call("POST", PODS, pod("a"))
    created["spec"]["containers"][0]["image"] = "busybox:2"
    status, _ = await http.call("PUT", f"{PODS}/a", created)
    assert status == 200
    status, body = await http.call(
        "PATCH",
        f"{PODS}/a",
        {"spec": {"restartPolicy": "Never"}},
        content_type="application/merge-patch+json",
    )
    assert (status, body["reason"]) == (422, "Invalid")


async def test_graceful_pod_delete_waits_for_the_kubelet(http: Http) -> None:
    await http.call("POST", PODS, pod("a"))
    await http.call("POST", f"{PODS}/a/binding", {"target": {"kind": "Node", "name": "n1"}})
    status, body = await http.call("DELETE", f"{PODS}/a")
    assert status == 200
    assert (
        body["metadata"]["deletionTimestamp"]
        and body["metadata"]["deletionGracePeriodSeconds"] == 30
    )
    status, _ = await http.call("GET", f"{PODS}/a")
    assert status == 200
    status, _ = await http.call("DELETE", f"{PODS}/a", {"gracePeriodSeconds": 0})
    assert status == 200
    status, _ = await http.call("GET", f"{PODS}/a")
    assert status == 404
    # an unscheduled pod goes at once
    await http.call("POST", PODS, pod("b"))
    await http.call("DELETE", f"{PODS}/b")
    assert (await http.call("GET", f"{PODS}/b"))[0] == 404


async def test_finalizers_hold_deletion_until_removed(http: Http) -> None:
    cm = {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}, "data": {"k": "v"}}
    await http.call("POST", "/api/v1/namespaces/default/configmaps", cm)
    path = "/api/v1/namespaces/default/configmaps/c"
    status, body = await http.call("DELETE", path)
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    status, body = await http.call(
        "PATCH",
        path,
        {"metadata": {"finalizers": ["example.com/more"]}},
        content_type="application/merge-patch+json",
    )
    assert status == 422  # no new finalizers once deleting
    status, _ = await http.call(
        "PATCH",
        path,
        [{"op": "remove", "path": "/metadata/finalizers"}],
        content_type="application/json-patch+json",
    )
    assert status == 200
    assert (await http.call("GET", path))[0] == 404


async def test_delete_preconditions_and_status_answer(http: Http) -> None:
    _, created = await http.call(
        "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}}
    )
    path = "/api/v1/namespaces/default/configmaps/c"
    status, body = await http.call("DELETE", path, {"preconditions": {"uid": "nope"}})
    assert status == 409
    status, body = await http.call(
        "DELETE", path, {"preconditions": {"uid": created["metadata"]["uid"]}}
    )
    assert status == 200 and body["kind"] == "Status" and body["status"] == "Success"


async def test_deletecollection_honours_selectors(http: Http) -> None:
    await http.call("POST", PODS, pod("a", {"g": "1"}))
    await http.call("POST", PODS, pod("b", {"g": "2"}))
    status, body = await http.call("DELETE", PODS, params={"labelSelector": "g=1"})
    assert status == 200 and [p["metadata"]["name"] for p in body["items"]] == ["a"]
    _, left = await http.call("GET", PODS)
    assert [p["metadata"]["name"] for p in left["items"]] == ["b"]


async def test_strategic_merge_patch_merges_lists_by_key(http: Http) -> None:
    body = pod("a", finalizers=["f/one"])
    body["spec"]["containers"] = [{"name": "a", "image": "i:1"}, {"name": "b", "image": "i:1"}]
    await http.call("POST", PODS, body)
    patch = {
        "metadata": {"finalizers": ["f/two"], "labels": {"new": "1"}},
        "spec": {"containers": [{"name": "a", "image": "i:2"}]},
    }
    status, patched = await http.call(
        "PATCH", f"{PODS}/a", patch, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, patched
    images = {c["name"]: c["image"] for c in patched["spec"]["containers"]}
    assert images == {"a": "i:2", "b": "i:1"}
    assert patched["metadata"]["finalizers"] == ["f/one", "f/two"]
    status, body = await http.call(
        "PATCH", f"{PODS}/a", patch, content_type="application/merge-patch+json"
    )
    assert status == 422  # a merge patch replaces the whole container list: forbidden for pods


async def test_json_patch_failures_are_unprocessable(http: Http) -> None:
    await http.call(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        {"metadata": {"name": "c"}, "data": {"a": "1"}},
    )
    path = "/api/v1/namespaces/default/configmaps/c"
    status, body = await http.call(
        "PATCH",
        path,
        [{"op": "test", "path": "/data/a", "value": "2"}],
        content_type="application/json-patch+json",
    )
    assert status == 422 and body["kind"] == "Status"
    status, _ = await http.call(
        "PATCH",
        path,
        [{"op": "replace", "path": "/nope/deeper", "value": 1}],
        content_type="application/json-patch+json",
    )
    assert status == 422
    # replace of an absent member of an existing object behaves like add (json-patch v4)
    status, body = await http.call(
        "PATCH",
        path,
        [{"op": "replace", "path": "/data/b", "value": "2"}],
        content_type="application/json-patch+json",
    )
    assert status == 200 and body["data"] == {"a": "1", "b": "2"}


async def test_apply_patch_creates_then_merges(http: Http) -> None:
    path = "/api/v1/namespaces/default/configmaps/c"
    doc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: '1'\n"
    status, body = await http.call(
        "PATCH",
        path,
        doc,
        content_type="application/apply-patch+yaml",
        params={"fieldManager": "test"},
    )
    assert status == 201 and body["data"] == {"a": "1"}
    status, body = await http.call(
        "PATCH",
        path,
        "data:\n  b: '2'\n",
        content_type="application/apply-patch+yaml",
        params={"fieldManager": "test"},
    )
    assert status == 200 and body["data"] == {"a": "1", "b": "2"}


async def test_namespace_deletion_removes_its_content(http: Http) -> None:
    await http.call("POST", "/api/v1/namespaces", {"metadata": {"name": "tmp"}})
    await http.call("POST", "/api/v1/namespaces/tmp/configmaps", {"metadata": {"name": "c"}})
    status, _body = await http.call("DELETE", "/api/v1/namespaces/tmp")
    assert status == 200
    assert (await http.call("GET", "/api/v1/namespaces/tmp/configmaps/c"))[0] == 404
    assert (await http.call("GET", "/api/v1/namespaces/tmp"))[0] == 404
    status, body = await http.call("DELETE", "/api/v1/namespaces/default")
    assert (status, body["reason"]) == (403, "Forbidden")


async def test_services_get_a_cluster_ip(http: Http) -> None:
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    _, created = await http.call("POST", "/api/v1/namespaces/default/services", svc)
    assert created["spec"]["clusterIP"].startswith("10.96.")
    assert created["spec"]["ports"][0]["targetPort"] == 80
    headless = {"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}
    _, created = await http.call("POST", "/api/v1/namespaces/default/services", headless)
    assert created["spec"]["clusterIP"] == "None"


async def test_protobuf_bodies_are_refused_with_415(http: Http) -> None:
    status, body = await http.call(
        "POST", PODS, b"\x6b\x38\x73\x00", content_type="application/vnd.kubernetes.protobuf"
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_validation_catches_generated_name_and_owner_bugs(http: Http) -> None:
    too_long = pod("a", {"ray.io/worker-group-replica-name": "x" * 64})
    status, body = await http.call("POST", PODS, too_long)
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.labels"
    twice = pod("b")
    twice["spec"]["containers"].append({"name": "main", "image": "x:1"})
    status, body = await http.call("POST", PODS, twice)
    assert status == 422 and "Duplicate" in body["message"]
    owners = pod("c")
    ref = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "u"}
    ref["controller"] = True
    owners["metadata"]["ownerReferences"] = [ref, {**ref, "uid": "v"}]
    status, body = await http.call("POST", PODS, owners)
    assert status == 422 and "Controller" in body["message"]
    host = pod("d")
    host["spec"]["hostname"] = "Not_A_Label"
    assert (await http.call("POST", PODS, host))[0] == 422
    empty = {"metadata": {"name": "s"}, "spec": {"selector": {"a": "b"}}}
    assert (await http.call("POST", "/api/v1/namespaces/default/services", empty))[0] == 422
    ok = pod("e", {"ray.io/cluster": "rc", "empty": ""})
    ok["spec"]["hostname"] = "rc-g-0-0"
    assert (await http.call("POST", PODS, ok))[0] == 201


async def test_subresources_accept_only_their_verbs(http: Http) -> None:
    await http.call("POST", PODS, pod("a"))
    status, body = await http.call("DELETE", f"{PODS}/a/status")
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    assert (await http.call("PUT", f"{PODS}/a/binding", {"target": {"name": "n"}}))[0] == 405
    assert (await http.call("GET", f"{PODS}/a/binding"))[0] == 405
    assert (await http.call("GET", f"{PODS}/a"))[0] == 200  # nothing was deleted
