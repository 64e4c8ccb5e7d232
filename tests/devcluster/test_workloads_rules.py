"""The Deployment controller's arithmetic and naming, beside the kubectl tests that drive it."""

from __future__ import annotations

from typing import Any

import pytest

from devkube.controllers.deployments import new_replicaset, rolling_limits
from devkube.controllers.workloads import HASH_LABEL, template_hash

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
}


def deployment(replicas: int, surge: Any = None, unavailable: Any = None) -> dict[str, Any]:
    rolling = {
        k: v for k, v in (("maxSurge", surge), ("maxUnavailable", unavailable)) if v is not None
    }
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
            "template": TEMPLATE,
        },
    }


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable", "expected"),
    [
        (4, None, None, (1, 1)),  # 25% each: surge rounds up, unavailable down
        (3, None, None, (1, 0)),
        (10, "30%", "30%", (3, 3)),
        (2, 0, 0, (0, 1)),  # both 0 would never progress: one may be unavailable
        (5, 2, "0%", (2, 0)),
    ],
)
def test_rolling_limits(replicas: int, surge: Any, unavailable: Any, expected: Any) -> None:
    assert rolling_limits(deployment(replicas, surge, unavailable)) == expected


def test_the_hash_ignores_its_own_label_and_unset_fields_but_not_content() -> None:
    base = template_hash(TEMPLATE)
    labelled = {**TEMPLATE, "metadata": {"labels": {"app": "web", HASH_LABEL: base}}}
    assert template_hash(labelled) == base
    # What `kubectl rollout undo` sends back: Go's zero values for unset fields.
    undone = {
        "metadata": {"labels": {"app": "web"}, "creationTimestamp": None},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27", "resources": {}}]},
    }
    assert template_hash(undone) == base
    changed = {**TEMPLATE, "spec": {"containers": [{"name": "main", "image": "nginx:1.28"}]}}
    assert template_hash(changed) != base
    assert len(base) == 10 and base.isalnum() and base.islower()


def test_a_new_replicaset_is_named_labelled_selected_and_owned_by_the_hash() -> None:
    d = deployment(3)
    pod_hash = template_hash(TEMPLATE)
    rs = new_replicaset(d, pod_hash, 2, 4)
    assert rs["metadata"]["name"] == f"web-{pod_hash}"
    assert rs["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "4"}
    assert rs["spec"]["replicas"] == 2
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: pod_hash}
    assert rs["spec"]["template"]["metadata"]["labels"][HASH_LABEL] == pod_hash
    (owner,) = rs["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Deployment", "u1", True)
    assert TEMPLATE["metadata"]["labels"] == {"app": "web"}  # the Deployment is not mutated
