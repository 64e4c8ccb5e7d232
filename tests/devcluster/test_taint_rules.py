"""The pure rules behind node lifecycle, as kube states them: toleration matching, how long a
pod may stay on a NoExecute-tainted node, which lifecycle taints a node carries, and the
DefaultTolerationSeconds admission."""

from __future__ import annotations

import math
from typing import Any

import pytest

from devkube.controllers.nodelifecycle import retainted, wanted_taints
from devkube.controllers.tainteviction import tolerated_for
from devkube.machinery.nodes import toleration_matches
from devkube.server.admission.tolerations import default_toleration_seconds

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
DEDICATED = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("toleration", "taint", "matches"),
    [
        ({"operator": "Exists"}, DEDICATED, True),  # empty key + Exists tolerates everything
        ({"key": "dedicated", "operator": "Exists"}, DEDICATED, True),
        ({"key": "dedicated", "value": "ml"}, DEDICATED, True),  # Equal is the default
        ({"key": "dedicated", "value": "db"}, DEDICATED, False),
        ({"key": "dedicated", "operator": "Equal"}, DEDICATED, False),
        ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, DEDICATED, False),
        ({"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, UNREACHABLE, True),
        ({"key": "node.kubernetes.io/unreachable"}, UNREACHABLE, True),  # "" == no value
    ],
)
def test_toleration_matching(
    toleration: dict[str, Any], taint: dict[str, Any], matches: bool
) -> None:
    assert toleration_matches(toleration, taint) is matches


def pod(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"tolerations": list(tolerations)}}


def test_how_long_a_pod_may_stay() -> None:
    short = {**UNREACHABLE, "operator": "Exists", "tolerationSeconds": 5}
    long = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    forever = {**UNREACHABLE, "operator": "Exists"}
    assert tolerated_for(pod(), [UNREACHABLE]) is None
    assert tolerated_for(pod(short), [UNREACHABLE]) == 5
    assert tolerated_for(pod(forever), [UNREACHABLE]) == math.inf
    # The shortest of the tolerations it uses counts.
    assert tolerated_for(pod(forever, long), [UNREACHABLE]) == 60
    assert tolerated_for(pod(short, long), [UNREACHABLE, DEDICATED]) == 5
    # One untolerated taint is enough to go now; negative seconds mean now too.
    assert tolerated_for(pod(short), [UNREACHABLE, DEDICATED]) is None
    assert tolerated_for(pod({**short, "tolerationSeconds": -3}), [UNREACHABLE]) == 0
    # A NoSchedule toleration does not tolerate NoExecute.
    assert tolerated_for(pod({**forever, "effect": "NoSchedule"}), [UNREACHABLE]) is None


def node(ready: str, taints: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "spec": {"taints": taints or [], **spec},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_lifecycle_taints_follow_ready_and_cordon() -> None:
    assert wanted_taints(node("True")) == []
    assert set(wanted_taints(node("False"))) == {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    }
    assert set(wanted_taints(node("Unknown", unschedulable=True))) == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    }
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    # Not-ready swapped for unreachable; others kept; NoExecute stamped.
    was = [gpu, {**NOT_READY}, {"key": NOT_READY["key"], "effect": "NoSchedule"}]
    now = retainted(node("Unknown", was), "2026-12-01T00:00:00Z")
    assert now is not None
    assert gpu in now and not [t for t in now if t["key"] == NOT_READY["key"]]
    assert {**UNREACHABLE, "timeAdded": "2026-12-01T00:00:00Z"} in now
    assert retainted(node("Unknown", now), "later") is None  # already right: no write
    assert retainted(node("True", now), "later") == [gpu]


def test_default_toleration_seconds_admission() -> None:
    plain: dict[str, Any] = {"spec": {}}
    default_toleration_seconds(plain)
    assert [(t["key"], t["tolerationSeconds"]) for t in plain["spec"]["tolerations"]] == [
        ("node.kubernetes.io/not-ready", 300),
        ("node.kubernetes.io/unreachable", 300),
    ]
    # Any toleration covering the key with NoExecute (or every effect) counts.
    covered = pod({"key": "node.kubernetes.io/not-ready", "operator": "Exists"})
    default_toleration_seconds(covered)
    assert [t["key"] for t in covered["spec"]["tolerations"]] == [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ]
    no_schedule_only = pod({**UNREACHABLE, "operator": "Exists", "effect": "NoSchedule"})
    default_toleration_seconds(no_schedule_only)
    assert len(no_schedule_only["spec"]["tolerations"]) == 3
    everything = pod({"operator": "Exists"})
    default_toleration_seconds(everything)
    assert everything["spec"]["tolerations"] == [{"operator": "Exists"}]
