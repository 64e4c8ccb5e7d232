"""KubeRay fields the operator accepts and does not act on, said out loud (docs/design.md §4,
rule 3a).

Our CRD keeps every field of KubeRay v1.7's RayCluster so that nothing a user stored is pruned
(§3.7), but several of them ask KubeRay's operator for something this one does not do: Ray
token authentication, mTLS, NetworkPolicies, an Ingress, GCS fault tolerance, a history
server collector, annotations of the head Service, the autoscaler's own command. Running such
a cluster silently without them is the worst answer (a cluster meant to require a token would
accept anyone), so the planner names them: a condition ``UnsupportedFields`` and one Warning
Event when the list first appears or changes. The cluster still runs: refusing it would break
every KubeRay manifest that spells one of these at a harmless value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raycluster_operator.api.models import RayCluster
from raycluster_operator.planning.actions import PlannedEvent
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.reasons import (
    Condition,
    ConditionReason,
    ConditionType,
    EventReason,
)
from raycluster_operator.planning.turn import ClusterTurn

#: What each field would do under KubeRay and what happens here instead, by its spec path.
MEANINGS: Mapping[str, str] = {
    "authOptions": "Ray token authentication is not configured by this operator; the cluster "
    "runs without it",
    "tlsOptions": "no mTLS between Ray pods; their traffic is not encrypted",
    "networkPolicy": "no NetworkPolicy is created for the cluster's pods",
    "historyServerOptions": "no history server collector runs",
    "gcsFaultToleranceOptions": "GCS fault tolerance is not configured; a head restart loses "
    "the GCS state",
    "headGroupSpec.enableIngress": "no Ingress is created for the dashboard",
    "headGroupSpec.ingressOptions": "its host, path and TLS reach no Ingress",
    "headServiceAnnotations": "not set on the head Service (use headService.metadata.annotations)",
    "autoscalerOptions.command": "the autoscaler sidecar runs the operator's command",
    "autoscalerOptions.args": "the autoscaler sidecar runs the operator's arguments",
}
#: The controller cuts an Event's note at 1024 characters (events.k8s.io's limit); every
#: field's sentence fits in one note (tests/planning/test_unsupported_fields.py).


def _present(value: Any) -> bool:
    return value is not None and value != {} and value != []


def _auth_on(value: Any) -> bool:
    """KubeRay's ``authOptions.mode`` defaults to ``token``: only an explicit ``disabled``
    (without Kubernetes token auth) asks for what this operator does, nothing."""
    if not isinstance(value, Mapping):
        return _present(value)
    return value.get("mode") != "disabled" or value.get("enableK8sTokenAuth") is True


def _tls_on(value: Any) -> bool:
    """``tlsOptions`` without ``enabled: true`` asks for no TLS, which is what runs."""
    return isinstance(value, Mapping) and value.get("enabled") is True


def unsupported_fields(cluster: RayCluster) -> list[str]:
    """The spec paths of `MEANINGS` this cluster sets, in `MEANINGS`' order. A field at a
    value that asks for nothing (``enableIngress: false``, and then any ``ingressOptions``;
    ``tlsOptions.enabled: false``; ``authOptions.mode: disabled``) is not listed: the cluster
    runs as it asks, under KubeRay's operator too."""
    spec = cluster.spec
    extra = spec.model_extra or {}
    head_extra = spec.head_group_spec.model_extra or {}
    autoscaler = spec.autoscaler_options
    scaler_extra = (autoscaler.model_extra or {}) if autoscaler is not None else {}
    found = {
        "authOptions": "authOptions" in extra and _auth_on(extra["authOptions"]),
        "tlsOptions": _tls_on(extra.get("tlsOptions")),
        "networkPolicy": _present(extra.get("networkPolicy")),
        "historyServerOptions": _present(extra.get("historyServerOptions")),
        "gcsFaultToleranceOptions": _present(extra.get("gcsFaultToleranceOptions")),
        "headGroupSpec.enableIngress": spec.head_group_spec.enable_ingress is True,
        # KubeRay reads ingressOptions only for the Ingress enableIngress asks for
        "headGroupSpec.ingressOptions": spec.head_group_spec.enable_ingress is True
        and _present(head_extra.get("ingressOptions")),
        "headServiceAnnotations": _present(extra.get("headServiceAnnotations")),
        "autoscalerOptions.command": _present(scaler_extra.get("command")),
        "autoscalerOptions.args": _present(scaler_extra.get("args")),
    }
    return [path for path in MEANINGS if found[path]]


def unsupported_message(paths: list[str]) -> str:
    """One sentence per field, in the condition and the Event alike."""
    return "; ".join(f"spec.{path}: {MEANINGS[path]}" for path in paths)


def _previous(cluster: RayCluster) -> tuple[str, str] | None:
    """The stored condition's (status, message), if the cluster has one."""
    conditions = cluster.status.conditions if cluster.status is not None else None
    for condition in conditions or ():
        if condition.type == ConditionType.UNSUPPORTED_FIELDS:
            return condition.status, condition.message
    return None


class UnsupportedFields(Feature):
    """Rule 3a's say in a pass: the condition every pass (so a status write carries it, and
    an unchanged list costs nothing), and the Warning only when the condition's message
    changes, so a cluster at steady state makes no Event."""

    rule = "3a"

    def __init__(self, turn: ClusterTurn) -> None:
        self.paths = unsupported_fields(turn.cluster)
        self.before = _previous(turn.cluster)
        self.said: Condition | None = None

    def finish(self, turn: ClusterTurn) -> None:
        if not self.paths:
            if self.before is not None:
                self.said = Condition(
                    ConditionType.UNSUPPORTED_FIELDS, False, ConditionReason.ALL_FIELDS_SUPPORTED
                )
            return
        message = unsupported_message(self.paths)
        self.said = Condition(
            ConditionType.UNSUPPORTED_FIELDS, True, ConditionReason.UNSUPPORTED_FIELDS, message
        )
        if self.before != ("True", message):
            turn.events.append(
                PlannedEvent("Warning", EventReason.UNSUPPORTED_FIELD, _note(message))
            )

    def conditions(self) -> Sequence[Condition]:
        return () if self.said is None else (self.said,)


def _note(message: str) -> str:
    """The Event's note: the condition's sentences, each naming its field, after what they
    share; short enough that every field's sentence fits (`MEANINGS`)."""
    return f"the spec sets fields this operator does not act on; the cluster runs: {message}"
