"""Our pods pass Pod Security `restricted` where the user's templates allow it (docs/design.md
§3.10): nothing the operator adds (env, the shared-memory and log volumes, the autoscaler
sidecar) pushes a pod below `baseline`, and with a restricted-ready template the head (with
its autoscaler sidecar) and every worker pass `restricted`, judged by the dev cluster's own
Pod Security Admission checks."""

from __future__ import annotations

import copy
from typing import Any

from devkube.server.admission.podsecurity import violations
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod

from .conftest import cluster_dict, worker_pod

POD = {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = load_cluster(obj)
    out = [build_head_pod(cluster)]
    for group in cluster.spec.worker_group_specs:
        hosts = group.num_of_hosts
        out.append(worker_pod(cluster, group, host=0 if hosts > 1 else None))
    return out


def restricted_ready(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    for template in [spec["headGroupSpec"]["template"]] + [
        g["template"] for g in spec["workerGroupSpecs"]
    ]:
        template["spec"]["securityContext"] = dict(POD)
        for c in template["spec"]["containers"]:
            c["securityContext"] = copy.deepcopy(CONTAINER)
    return obj


def test_default_templates_stay_baseline_with_autoscaling() -> None:
    for pod in pods(cluster_dict(enableInTreeAutoscaling=True)):
        assert violations("baseline", pod["metadata"], pod["spec"]) == []
    # The sidecar alone meets restricted's container checks even here.
    head = pods(cluster_dict(enableInTreeAutoscaling=True))[0]
    sidecar = head["spec"]["containers"][-1]
    assert sidecar["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_restricted_ready_templates_give_restricted_pods() -> None:
    obj = restricted_ready(cluster_dict(enableInTreeAutoscaling=True))
    built = pods(obj)
    assert len(built[0]["spec"]["containers"]) == 2  # the head with the autoscaler sidecar
    for pod in built:
        assert violations("restricted", pod["metadata"], pod["spec"]) == [], pod["metadata"]


def test_sidecar_follows_a_non_root_ray_container() -> None:
    obj = cluster_dict(enableInTreeAutoscaling=True)
    head = obj["spec"]["headGroupSpec"]["template"]["spec"]
    head["containers"][0]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 1000}
    sidecar = pods(obj)[0]["spec"]["containers"][-1]
    assert sidecar["securityContext"]["runAsNonRoot"] is True
    assert sidecar["securityContext"]["runAsUser"] == 1000


def test_without_restricted_fields_the_template_is_what_restricted_names() -> None:
    """Kube's own words say what the user's template lacks (the sidecar is not named)."""
    head = pods(cluster_dict(enableInTreeAutoscaling=True))[0]
    found = violations("restricted", head["metadata"], head["spec"])
    text = ", ".join(found)
    assert 'container "ray-head" must set securityContext.allowPrivilegeEscalation=false' in text
    assert '"autoscaler" must set securityContext.allowPrivilegeEscalation' not in text
