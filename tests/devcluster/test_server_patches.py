"""Patch semantics as pure functions: strategic merge directives and the json-patch quirk."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devkube.server.errors import ApiError
from devkube.server.registry.patches import json_patch, merge_patch, strategic_merge


def test_merge_patch_follows_rfc7386() -> None:
    doc = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(doc, {"a": {"b": None, "d": 3}, "l": [3]}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
    }
    assert doc == {"a": {"b": 1, "c": 2}, "l": [1, 2]}  # the input is left alone


def test_strategic_merge_keys_and_directives() -> None:
    spec = {
        "containers": [
            {
                "name": "a",
                "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                "ports": [{"containerPort": 80, "name": "http"}],
                "volumeMounts": [{"mountPath": "/a", "name": "v"}],
            }
        ],
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}],
        "tolerations": [{"key": "t"}],
    }
    patch = {
        "containers": [
            {
                "name": "a",
                "env": [{"name": "Y", "$patch": "delete"}, {"name": "Z", "value": "3"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}],
                "volumeMounts": [{"mountPath": "/a", "readOnly": True}],
            },
            {"name": "b", "image": "i"},
        ],
        "volumes": [{"name": "w", "$patch": "delete"}],
        "tolerations": [{"key": "u"}],
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
    }
    out = strategic_merge(spec, patch)
    a = out["containers"][0]
    assert [e["name"] for e in a["env"]] == ["X", "Z"]
    assert a["ports"] == [
        {"containerPort": 80, "name": "http", "protocol": "TCP"},
        {"containerPort": 81},
    ]
    assert a["volumeMounts"] == [{"mountPath": "/a", "name": "v", "readOnly": True}]
    assert [c["name"] for c in out["containers"]] == ["a", "b"]
    assert out["volumes"] == [{"name": "v", "emptyDir": {}}]
    assert out["tolerations"] == [{"key": "u"}]  # no merge key: the list is replaced
    assert not any(k.startswith("$") for k in out)


def test_strategic_merge_replace_retain_and_primitive_delete() -> None:
    doc = {"m": {"a": 1, "b": 2}, "finalizers": ["x", "y"], "conditions": [{"type": "A"}]}
    out = strategic_merge(
        doc,
        {
            "m": {"$patch": "replace", "c": 3},
            "$deleteFromPrimitiveList/finalizers": ["x"],
            "conditions": [{"type": "B", "status": "True"}],
        },
    )
    assert out == {
        "m": {"c": 3},
        "finalizers": ["y"],
        "conditions": [{"type": "A"}, {"type": "B", "status": "True"}],
    }
    assert strategic_merge(
        {"a": 1, "b": 2, "s": {"x": 1}}, {"$retainKeys": ["a", "s"], "s": {"y": 2}}
    ) == {
        "a": 1,
        "s": {"x": 1, "y": 2},
    }
    services = strategic_merge(
        {"ports": [{"port": 80, "name": "a"}]}, {"ports": [{"port": 80, "name": "b"}]}
    )
    assert services == {"ports": [{"port": 80, "name": "b"}]}


def test_json_patch_replace_of_missing_member_adds_it_like_kubernetes() -> None:
    doc = {"spec": {"workerGroupSpecs": [{"groupName": "g", "replicas": 1}]}}
    out = json_patch(
        doc,
        [
            {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 2},
            {
                "op": "replace",
                "path": "/spec/workerGroupSpecs/0/scaleStrategy",
                "value": {"workersToDelete": ["p"]},
            },
        ],
    )
    assert out["spec"]["workerGroupSpecs"][0] == {
        "groupName": "g",
        "replicas": 2,
        "scaleStrategy": {"workersToDelete": ["p"]},
    }
    with pytest.raises(ApiError) as missing_index:
        json_patch(doc, [{"op": "replace", "path": "/spec/workerGroupSpecs/3", "value": {}}])
    assert missing_index.value.code == 422
    with pytest.raises(ApiError) as missing_parent:
        json_patch(doc, [{"op": "replace", "path": "/status/x", "value": 1}])
    assert missing_parent.value.code == 422


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text("abc", min_size=1, max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text("abc", min_size=1, max_size=2), json_values, max_size=4)


@settings(max_examples=40, deadline=None)
@given(json_objects, json_objects)
def test_json_patch_between_two_documents_reaches_the_second(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    ops = jsonpatch.make_patch(a, b).patch
    assert json_patch(a, ops) == b


@settings(max_examples=40, deadline=None)
@given(json_objects, json_objects)
def test_merge_patches_are_idempotent(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert merge_patch(a, {}) == a
    merged = merge_patch(a, b)
    assert merge_patch(merged, b) == merged  # merge patches are idempotent
    assert strategic_merge(a, {}) == a
