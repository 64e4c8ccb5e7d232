"""Unit checks of the pieces behind RBAC (the kubectl tests are the proof; these pin the
corner cases): request attributes from URLs, rule matching and escalation coverage."""

from __future__ import annotations

import pytest

from devkube.server.auth.escalation import compact, missing
from devkube.server.auth.rbac import Rule
from devkube.server.auth.requestinfo import Attributes, attributes


@pytest.mark.parametrize(
    ("method", "path", "query", "want"),
    [
        ("GET", "/api/v1/namespaces/a/pods", {}, ("list", "", "a", "pods", "", "")),
        ("GET", "/api/v1/namespaces/a/pods", {"watch": "true"}, ("watch", "", "a", "pods", "", "")),
        ("GET", "/api/v1/watch/namespaces/a/pods/p", {}, ("watch", "", "a", "pods", "", "p")),
        (
            "GET",
            "/api/v1/namespaces/a/pods",
            {"fieldSelector": "metadata.name=p", "watch": "1"},
            ("watch", "", "a", "pods", "", "p"),
        ),
        ("GET", "/api/v1/namespaces/a/pods/p/log", {}, ("get", "", "a", "pods", "log", "p")),
        ("POST", "/api/v1/namespaces/a/pods/p/exec", {}, ("create", "", "a", "pods", "exec", "p")),
        ("GET", "/api/v1/namespaces/a/pods/p/exec", {}, ("create", "", "a", "pods", "exec", "p")),
        (
            "GET",
            "/api/v1/namespaces/a/pods/p/portforward",
            {},
            ("create", "", "a", "pods", "portforward", "p"),
        ),
        ("DELETE", "/api/v1/namespaces/a/pods", {}, ("deletecollection", "", "a", "pods", "", "")),
        ("GET", "/api/v1/namespaces/a", {}, ("get", "", "a", "namespaces", "", "a")),
        (
            "PUT",
            "/api/v1/namespaces/a/status",
            {},
            ("update", "", "a", "namespaces", "status", "a"),
        ),
        ("GET", "/api/v1/nodes", {}, ("list", "", "", "nodes", "", "")),
        (
            "PATCH",
            "/apis/ray.io/v1/namespaces/a/rayclusters/c/status",
            {},
            ("patch", "ray.io", "a", "rayclusters", "status", "c"),
        ),
        ("HEAD", "/apis/apps/v1/deployments", {}, ("list", "apps", "", "deployments", "", "")),
    ],
)
def test_attributes_from_urls(
    method: str, path: str, query: dict[str, str], want: tuple[str, ...]
) -> None:
    got = attributes(method, path, query)
    assert got.resource_request
    assert (got.verb, got.api_group, got.namespace, got.resource, got.subresource, got.name) == want


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/ray.io/v1", "/healthz"])
def test_non_resource_paths(path: str) -> None:
    assert attributes("GET", path, {}) == Attributes("get", False, path)


def _req(verb: str, resource: str, sub: str = "", name: str = "", group: str = "") -> Attributes:
    return Attributes(verb, True, api_group=group, resource=resource, subresource=sub, name=name)


def test_rule_matching() -> None:
    star_scale = Rule(("get",), ("*",), ("*/scale",))
    assert star_scale.allows(_req("get", "deployments", "scale", group="apps"))
    assert not star_scale.allows(_req("get", "deployments", group="apps"))
    named = Rule(("get",), ("",), ("pods",), ("a",))
    assert named.allows(_req("get", "pods", name="a"))
    assert not named.allows(_req("get", "pods", name="b"))
    assert not named.allows(_req("get", "pods"))  # a list is not of one name
    everything = Rule(("*",), ("*",), ("*",))
    assert everything.allows(_req("patch", "pods", "status"))
    urls = Rule(("get",), non_resource_urls=("/logs/*",))
    assert urls.allows(Attributes("get", False, "/logs/a/b"))
    assert not urls.allows(Attributes("get", False, "/log"))
    assert not urls.allows(_req("get", "logs"))


def test_coverage_and_compaction() -> None:
    held = [Rule(("get", "list"), ("",), ("pods", "services")), Rule(("*",), ("",), ("*/status",))]
    wanted = [
        Rule(("get", "delete", "watch"), ("",), ("pods",)),
        Rule(("patch",), ("",), ("pods/status",)),
    ]
    lacking = missing(held, wanted)
    assert [r.compact_string() for r in compact(lacking)] == [
        '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "watch"]}'
    ]
    assert not missing([Rule(("*",), ("*",), ("*",))], wanted)
    only_a = [Rule(("get",), ("",), ("pods",), ("a",))]
    assert missing(only_a, [Rule(("get",), ("",), ("pods",), ("a",))]) == []
    assert missing(only_a, [Rule(("get",), ("",), ("pods",))]) != []
