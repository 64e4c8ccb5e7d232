"""The DELETE decision as a pure function of the object, the options and now."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from devkube.server.registry.deletion import (
    Outcome,
    decide,
    pod_grace,
    precondition_failure,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def obj(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", "uid": "u", "resourceVersion": "5", **meta}}


def running_pod(**meta: Any) -> dict[str, Any]:
    return {**obj(**meta), "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}}


def test_plain_objects_go_at_once() -> None:
    assert decide(obj(), {}, NOW, is_pod=False, is_namespace=False).outcome is Outcome.REMOVE


def test_finalizers_mark_instead_of_removing() -> None:
    d = decide(obj(finalizers=["a/b"]), {}, NOW, is_pod=False, is_namespace=False)
    assert d.outcome is Outcome.MARK and d.marked is not None
    assert d.marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert d.marked["metadata"]["deletionGracePeriodSeconds"] == 0


def test_propagation_policies_become_gc_finalizers() -> None:
    fg = decide(obj(), {"propagationPolicy": "Foreground"}, NOW, is_pod=False, is_namespace=False)
    assert fg.marked is not None and fg.marked["metadata"]["finalizers"] == ["foregroundDeletion"]
    orphan = decide(obj(), {"orphanDependents": True}, NOW, is_pod=False, is_namespace=False)
    assert orphan.marked is not None and orphan.marked["metadata"]["finalizers"] == ["orphan"]
    bg = decide(obj(), {"propagationPolicy": "Background"}, NOW, is_pod=False, is_namespace=False)
    assert bg.outcome is Outcome.REMOVE


def test_running_pods_get_their_grace_period() -> None:
    d = decide(running_pod(), {}, NOW, is_pod=True, is_namespace=False)
    assert d.marked is not None
    assert d.marked["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:30Z"
    assert pod_grace(running_pod(), {"gracePeriodSeconds": 5}) == 5
    assert pod_grace({"spec": {}}, {"gracePeriodSeconds": 5}) == 0  # unscheduled: nothing runs it
    done = {**running_pod(), "status": {"phase": "Succeeded"}}
    assert pod_grace(done, {}) == 0


def test_terminating_pods_only_shorten() -> None:
    terminating = running_pod(deletionTimestamp="x", deletionGracePeriodSeconds=30)
    longer = decide(terminating, {"gracePeriodSeconds": 60}, NOW, is_pod=True, is_namespace=False)
    assert longer.outcome is Outcome.KEEP
    now = decide(terminating, {"gracePeriodSeconds": 0}, NOW, is_pod=True, is_namespace=False)
    assert now.outcome is Outcome.REMOVE
    held = running_pod(deletionTimestamp="x", deletionGracePeriodSeconds=30, finalizers=["a/b"])
    shortened = decide(held, {"gracePeriodSeconds": 0}, NOW, is_pod=True, is_namespace=False)
    assert shortened.marked is not None
    assert shortened.marked["metadata"]["deletionGracePeriodSeconds"] == 0


def test_namespaces_always_terminate_first() -> None:
    d = decide(obj(), {}, NOW, is_pod=False, is_namespace=True)
    assert d.marked is not None and d.marked["status"]["phase"] == "Terminating"


def test_preconditions() -> None:
    assert precondition_failure(obj()["metadata"], {"preconditions": {"uid": "u"}}) is None
    assert "UID" in str(precondition_failure(obj()["metadata"], {"preconditions": {"uid": "v"}}))
    stale = {"preconditions": {"resourceVersion": "4"}}
    assert "ResourceVersion" in str(precondition_failure(obj()["metadata"], stale))
