from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkube.process.downward import (
    DownwardContext,
    field_ref_value,
    resource_field_value,
)
from devkube.process.envvars import container_env, expand, expand_all

POD: dict[str, Any] = {
    "metadata": {
        "name": "head-0",
        "namespace": "ml",
        "uid": "u-1",
        "labels": {"ray.io/cluster": "c1", "app": "x"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "node-a", "serviceAccountName": "ray", "containers": []},
    "status": {},
}
CTX = DownwardContext(pod_ip="127.1.0.7", host_ip="127.0.0.1", allocatable={"cpu": "8"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(A)", "1"),
        ("x$(A)y$(B)z", "x1y22z"),
        ("$$(A)", "$(A)"),
        ("$$$(A)", "$1"),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("$(A", "$(A"),
        ("$()", "$()"),
        ("cost $5", "cost $5"),
        ("end$", "end$"),
        ("$$", "$"),
    ],
)
def test_expand_follows_kubernetes_rules(text: str, expected: str) -> None:
    assert expand(text, {"A": "1", "B": "22"}) == expected


@given(st.text(alphabet=st.characters(blacklist_characters="$")))
def test_text_without_dollars_is_unchanged(text: str) -> None:
    assert expand(text, {"A": "1"}) == text


def test_env_values_see_only_earlier_variables() -> None:
    container = {
        "env": [
            {"name": "LATE_REF", "value": "$(B)"},
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-b"},
            {"name": "A", "value": "$(A)$(A)"},
        ]
    }
    env = container_env(POD, container, CTX)
    assert env["LATE_REF"] == "$(B)"
    assert env["B"] == "a-b"
    assert env["A"] == "aa"


def test_service_env_comes_first_and_can_be_referenced() -> None:
    container = {"env": [{"name": "API", "value": "$(KUBERNETES_SERVICE_HOST):443"}]}
    env = container_env(POD, container, CTX, service_env={"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert env["API"] == "10.0.0.1:443"


def test_command_is_expanded_against_final_env() -> None:
    assert expand_all(["echo", "$(X)", "$$(X)"], {"X": "hi"}) == ["echo", "hi", "$(X)"]


def test_downward_field_refs() -> None:
    container = {
        "env": [
            {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "FQ", "value": "$(N).$(NS) at $(IP)"},
        ]
    }
    env = container_env(POD, container, CTX)
    assert env["FQ"] == "head-0.ml at 127.1.0.7"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.uid", "u-1"),
        ("metadata.labels['ray.io/cluster']", "c1"),
        ("metadata.labels['missing']", ""),
        ("metadata.annotations['note']", "hi"),
        ("spec.nodeName", "node-a"),
        ("spec.serviceAccountName", "ray"),
        ("status.hostIP", "127.0.0.1"),
        ("metadata.labels", 'app="x"\nray.io/cluster="c1"'),
    ],
)
def test_field_ref_paths(path: str, expected: str) -> None:
    assert field_ref_value(POD, path, CTX) == expected


def test_unknown_field_path_is_refused() -> None:
    with pytest.raises(ValueError, match="fieldPath"):
        field_ref_value(POD, "spec.bogus", CTX)


@pytest.mark.parametrize(
    ("resource", "divisor", "expected"),
    [
        ("limits.cpu", None, "2"),
        ("limits.cpu", "1m", "1500"),
        ("requests.cpu", None, "1"),
        ("limits.memory", "1Mi", "2048"),
        ("limits.memory", None, str(2 * 2**30)),
        ("requests.memory", None, str(2 * 2**30)),
        ("limits.ephemeral-storage", None, "0"),
    ],
)
def test_resource_field_refs_round_up(resource: str, divisor: str | None, expected: str) -> None:
    container = {
        "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}, "requests": {"cpu": "1"}}
    }
    assert resource_field_value(container, resource, divisor, {}) == expected


def test_unset_cpu_limit_reads_as_node_allocatable() -> None:
    assert resource_field_value({}, "limits.cpu", None, {"cpu": "8"}) == "8"


def test_resource_field_ref_in_env_may_name_another_container() -> None:
    pod = dict(POD, spec={"containers": [{"name": "side", "resources": {"limits": {"cpu": "3"}}}]})
    ref = {"resource": "limits.cpu", "containerName": "side"}
    env = container_env(pod, {"env": [{"name": "C", "valueFrom": {"resourceFieldRef": ref}}]}, CTX)
    assert env["C"] == "3"


def test_config_map_and_secret_refs_use_the_lookup() -> None:
    data = {("ConfigMap", "cm", "k"): "v", ("Secret", "s", ""): "A=1\nB=2"}
    container = {
        "envFrom": [{"secretRef": {"name": "s"}, "prefix": "S_"}],
        "env": [
            {"name": "K", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
            {
                "name": "OPT",
                "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k", "optional": True}},
            },
        ],
    }
    env = container_env(POD, container, CTX, lookup=lambda kind, n, k: data.get((kind, n, k)))
    assert env == {"S_A": "1", "S_B": "2", "K": "v"}


def test_missing_required_key_is_an_error() -> None:
    container = {"env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    with pytest.raises(ValueError, match="not found"):
        container_env(POD, container, CTX, lookup=lambda *_: None)
