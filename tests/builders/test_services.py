"""Head and headless services, and the autoscaler's RBAC."""

from __future__ import annotations

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import (
    build_autoscaler_rbac,
    build_head_service,
    build_headless_service,
    needs_headless_service,
)

from .conftest import cluster_dict, make_cluster

CLUSTER = make_cluster()


def test_head_service_selects_the_head_and_exposes_its_ports() -> None:
    svc = build_head_service(CLUSTER)
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["metadata"]["namespace"] == "ml"
    assert svc["metadata"]["ownerReferences"][0]["controller"] is True
    assert svc["spec"]["selector"] == {"ray.io/cluster": "demo", "ray.io/node-type": "head"}
    assert [(p["name"], p["port"]) for p in svc["spec"]["ports"]] == [
        ("client", 10001),
        ("dashboard", 8265),
        ("gcs-server", 6379),
        ("metrics", 8080),
        ("serve", 8000),
    ]
    assert svc["spec"]["type"] == "ClusterIP"
    # One head pod: KubeRay makes the ClusterIP head service headless.
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["metadata"]["labels"] == {
        "ray.io/cluster": "demo",
        "ray.io/node-type": "head",
        "ray.io/identifier": "demo-head",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "raycluster-operator",
    }


def test_head_service_uses_the_users_ports() -> None:
    obj = cluster_dict()
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": 9999},
        {"name": "serve", "containerPort": 8000},
    ]
    obj["spec"]["headGroupSpec"]["serviceType"] = "NodePort"
    svc = build_head_service(load_cluster(obj))
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert ports == {"dashboard": 9999, "serve": 8000, "metrics": 8080}
    assert svc["spec"]["type"] == "NodePort"
    assert "clusterIP" not in svc["spec"]


def test_a_users_head_service_is_the_base() -> None:
    obj = cluster_dict()
    obj["spec"]["headGroupSpec"]["headService"] = {
        "metadata": {
            "annotations": {"a": "b"},
            "labels": {"ray.io/cluster": "evil", "x": "y"},
            "namespace": "other",
        },
        "spec": {
            "type": "LoadBalancer",
            "selector": {"evil": "1"},
            "ports": [{"name": "dashboard", "port": 80, "targetPort": 8265}],
        },
    }
    svc = build_head_service(load_cluster(obj))
    assert svc["metadata"]["name"] == "demo-head-svc"
    assert svc["metadata"]["namespace"] == "ml"
    assert svc["metadata"]["annotations"] == {"a": "b"}
    assert svc["metadata"]["labels"]["ray.io/cluster"] == "demo"
    assert svc["metadata"]["labels"]["x"] == "y"
    assert svc["spec"]["selector"] == {"ray.io/cluster": "demo", "ray.io/node-type": "head"}
    assert svc["spec"]["type"] == "LoadBalancer"
    ports = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    assert ports["dashboard"] == 80 and ports["gcs-server"] == 6379


def test_headless_service_matches_kuberay() -> None:
    svc = build_headless_service(CLUSTER)
    assert svc["metadata"]["name"] == "demo-headless"
    assert svc["metadata"]["labels"]["ray.io/headless-worker-svc"] == "demo"
    assert svc["spec"] == {
        "type": "ClusterIP",
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {"ray.io/cluster": "demo", "ray.io/node-type": "worker"},
    }
    assert needs_headless_service(CLUSTER)


def test_long_cluster_names_give_valid_service_names() -> None:
    obj = cluster_dict()
    obj["metadata"]["name"] = "c" * 63
    cluster = load_cluster(obj)
    for svc in (build_head_service(cluster), build_headless_service(cluster)):
        assert len(svc["metadata"]["name"]) <= 63
    assert build_headless_service(cluster)["metadata"]["name"].endswith("-headless")


def test_autoscaler_rbac() -> None:
    sa, role, binding = build_autoscaler_rbac(make_cluster(enableInTreeAutoscaling=True))
    assert [o["kind"] for o in (sa, role, binding)] == ["ServiceAccount", "Role", "RoleBinding"]
    assert {o["metadata"]["name"] for o in (sa, role, binding)} == {"demo"}
    assert all(o["metadata"]["namespace"] == "ml" for o in (sa, role, binding))
    rules = {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert {"get", "patch"} <= rules[("ray.io", "rayclusters")]
    assert {"get", "list", "watch"} <= rules[("", "pods")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo", "namespace": "ml"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_a_users_head_service_account_is_bound_not_created() -> None:
    obj = cluster_dict(enableInTreeAutoscaling=True)
    obj["spec"]["headGroupSpec"]["template"]["spec"]["serviceAccountName"] = "team-sa"
    objects = build_autoscaler_rbac(load_cluster(obj))
    assert [o["kind"] for o in objects] == ["Role", "RoleBinding"]
    assert objects[1]["subjects"][0]["name"] == "team-sa"


def test_rbac_objects_do_not_share_metadata() -> None:
    sa, role, _ = build_autoscaler_rbac(make_cluster(enableInTreeAutoscaling=True))
    sa["metadata"]["resourceVersion"] = "1"
    assert "resourceVersion" not in role["metadata"]
