"""The install manifests: least privilege that still lets the operator do its job."""

from __future__ import annotations

from click.testing import CliRunner

import kustomize_render
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders import build_autoscaler_rbac
from raycluster_operator.cli import main
from raycluster_operator.controller.install import operator_manifests, operator_rules


def grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_operator_holds_every_permission_it_grants_the_autoscaler() -> None:
    cluster = RayCluster.model_validate(
        {
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"enableInTreeAutoscaling": True, "headGroupSpec": {"template": {}}},
        }
    )
    role = next(o for o in build_autoscaler_rbac(cluster) if o["kind"] == "Role")
    assert grants(role["rules"]) <= grants(operator_rules())


def test_the_operator_may_write_status_but_not_replace_a_raycluster() -> None:
    held = grants(operator_rules())
    assert ("ray.io", "rayclusters/status", "patch") in held
    assert ("ray.io", "rayclusters", "update") not in held
    assert ("", "pods", "update") not in held and ("", "pods", "create") in held
    assert not any(verb == "*" or res == "*" for _, res, verb in held)


def test_manifests_all_prints_an_installable_set() -> None:
    result = CliRunner().invoke(main, ["manifests", "all", "--namespace", "ops"])
    assert result.exit_code == 0, result.output
    kinds = [d["kind"] for d in kustomize_render.documents(result.output)]
    assert kinds[0] == "CustomResourceDefinition"
    assert {"ClusterRole", "ClusterRoleBinding", "Deployment", "ServiceAccount"} <= set(kinds)


def test_a_namespaced_install_reads_only_nodes_cluster_wide() -> None:
    """Changed on purpose with host-loss failover: Nodes are cluster-scoped, so the one
    ClusterRole of a namespaced install reads nodes, and nothing else."""
    objects = operator_manifests("ops", watched=["a", "b"])
    kinds = [o["kind"] for o in objects]
    assert kinds.count("Role") == 3  # 2 watched + leases
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}
    ]


def test_the_deployment_probes_and_exposes_metrics() -> None:
    deployment = next(o for o in operator_manifests("ops") if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {p["containerPort"] for p in container["ports"]} == {8080, 8082}
