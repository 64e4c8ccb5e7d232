"""Rule 3a: KubeRay fields the operator accepts and does not act on are named in a condition
and one Warning Event, once; the cluster still runs, and a converged one writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from raycluster_operator.api.models import load_cluster
from raycluster_operator.planning import CreateReason
from raycluster_operator.planning.features.unsupported import MEANINGS, unsupported_fields

from .cluster import Loop, cluster, cluster_obj, worker_group

#: A KubeRay v1.7 spec setting every field of rule 3a (and priority, which is not one).
V17_FIELDS: dict[str, Any] = {
    "authOptions": {"mode": "token"},
    "tlsOptions": {"enabled": True},
    "networkPolicy": {"mode": "DenyAllIngress"},
    "historyServerOptions": {"collectorOptions": {"image": "collector:1"}},
    "gcsFaultToleranceOptions": {"backend": "rocksdb"},
    "headServiceAnnotations": {"a": "b"},
    "autoscalerOptions": {"command": ["ray"], "args": ["--x"]},
}


def _v17_cluster() -> dict[str, Any]:
    obj = cluster_obj(worker_group(replicas=1, priority=3), **V17_FIELDS)
    obj["spec"]["headGroupSpec"] |= {"enableIngress": True, "ingressOptions": {"host": "h"}}
    return obj


def _condition(status: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status["conditions"] if c["type"] == "UnsupportedFields"), None)


def test_every_field_is_named_in_order_and_priority_is_not() -> None:
    assert unsupported_fields(load_cluster(_v17_cluster())) == list(MEANINGS)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("authOptions", {"mode": "disabled"}),
        ("tlsOptions", {"enabled": False}),
        ("tlsOptions", {}),
        ("networkPolicy", {}),
        ("headServiceAnnotations", {}),
    ],
)
def test_a_value_that_asks_for_nothing_is_not_named(field: str, value: Any) -> None:
    assert unsupported_fields(cluster(worker_group(), **{field: value})) == []


def test_auth_options_default_to_token_as_kuberays_do() -> None:
    """KubeRay's ``authOptions.mode`` defaults to ``token``: an empty authOptions asks for it."""
    assert unsupported_fields(cluster(worker_group(), authOptions={})) == ["authOptions"]
    k8s_token = {"mode": "disabled", "enableK8sTokenAuth": True}
    assert unsupported_fields(cluster(worker_group(), authOptions=k8s_token)) == ["authOptions"]


def test_ingress_options_without_enable_ingress_are_not_named() -> None:
    """KubeRay reads ingressOptions only for the Ingress enableIngress asks for."""
    obj = cluster_obj(worker_group())
    obj["spec"]["headGroupSpec"]["ingressOptions"] = {"host": "h"}
    assert unsupported_fields(load_cluster(obj)) == []
    obj["spec"]["headGroupSpec"]["enableIngress"] = False
    assert unsupported_fields(load_cluster(obj)) == []


def test_the_cluster_runs_with_one_warning_and_a_condition_then_stays_quiet() -> None:
    loop = Loop(load_cluster(_v17_cluster()))
    first = loop.plan()
    assert first.creates[0].reason is CreateReason.HEAD_MISSING  # it runs
    warnings = [e for e in first.events if e.reason == "UnsupportedField"]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert warnings[0].message.startswith(
        "the spec sets fields this operator does not act on; the cluster runs: "
        "spec.authOptions: Ray token authentication is not configured by this operator; the "
        "cluster runs without it; spec.tlsOptions: "
    )
    assert all(f"spec.{path}: " in warnings[0].message for path in MEANINGS)
    assert len(warnings[0].message) <= 1024  # an Event's note is cut there
    condition = _condition(first.status)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "UnsupportedFields")
    assert condition["message"].startswith(
        "spec.authOptions: Ray token authentication is not configured by this operator; the "
        "cluster runs without it"
    )
    loop.apply(first)
    settled = loop.settle()
    assert not [e for e in settled.events if e.reason == "UnsupportedField"]
    loop.apply(settled)
    again = loop.plan()
    # steady state: no Event, and the status repeats exactly (the controller writes nothing)
    assert again.is_empty and not again.events and again.status == settled.status


def test_a_changed_list_warns_again_and_a_cleared_one_turns_false() -> None:
    obj = cluster_obj(worker_group(replicas=1), authOptions={"mode": "token"})
    loop = Loop(load_cluster(obj))
    loop.apply(loop.settle())
    obj["spec"]["tlsOptions"] = {"enabled": True}
    loop.respec(obj)
    changed = loop.plan()
    [warning] = [e for e in changed.events if e.reason == "UnsupportedField"]
    assert "spec.authOptions: " in warning.message and "spec.tlsOptions: " in warning.message
    loop.apply(changed)
    del obj["spec"]["authOptions"], obj["spec"]["tlsOptions"]
    loop.respec(obj)
    cleared = loop.plan()
    assert not [e for e in cleared.events if e.reason == "UnsupportedField"]
    condition = _condition(cleared.status)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "AllFieldsSupported")


def test_a_cluster_that_never_set_one_has_no_such_condition() -> None:
    plan = Loop(cluster(worker_group(replicas=1))).plan()
    assert _condition(plan.status) is None
    assert not [e for e in plan.events if e.reason == "UnsupportedField"]
