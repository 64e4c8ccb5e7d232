"""The probes KubeRay v1.7 injects into the Ray container (docs/design.md, rule 3.4c),
checked against the manifest KubeRay's BuildPod would write for the same cluster."""

from __future__ import annotations

from typing import Any

import pytest

from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod
from raycluster_operator.builders.probes import unified_health

from .conftest import cluster_dict, worker_pod


def _pods(ray_version: str | None, **params: str) -> tuple[dict[str, Any], dict[str, Any]]:
    obj = cluster_dict()
    if ray_version is not None:
        obj["spec"]["rayVersion"] = ray_version
    obj["spec"]["headGroupSpec"]["rayStartParams"] = dict(params)
    obj["spec"]["workerGroupSpecs"][1]["rayStartParams"] = dict(params)
    cluster = load_cluster(obj)
    cpu = cluster.spec.worker_group_specs[1]
    worker = worker_pod(cluster, cpu)
    return build_head_pod(cluster)["spec"]["containers"][0], worker["spec"]["containers"][0]


def _timing(probe: dict[str, Any]) -> tuple[int, int, int, int, int]:
    keys = ("initialDelaySeconds", "timeoutSeconds", "periodSeconds")
    return (*(probe[k] for k in keys), probe["successThreshold"], probe["failureThreshold"])


def test_ray_2_53_and_newer_get_one_http_check_of_the_agent() -> None:
    head, worker = _pods("2.60.0")
    for container in (head, worker):
        for kind in ("readinessProbe", "livenessProbe"):
            assert container[kind]["httpGet"] == {"path": "/api/healthz", "port": 52365}
            assert "exec" not in container[kind]
    assert _timing(head["readinessProbe"]) == (10, 5, 5, 1, 10)
    assert _timing(head["livenessProbe"]) == (30, 5, 5, 1, 120)
    assert _timing(worker["readinessProbe"]) == (10, 2, 5, 1, 10)
    assert _timing(worker["livenessProbe"]) == (30, 2, 5, 1, 120)


def test_older_ray_gets_kuberays_wget_checks_raylet_everywhere_gcs_on_the_head() -> None:
    head, worker = _pods("2.52.1")
    raylet = "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz"
    gcs = "wget --tries 1 -T 10 -q -O- http://localhost:8265/api/gcs_healthz"
    assert head["readinessProbe"]["exec"]["command"] == [
        "bash",
        "-c",
        f"{raylet} | grep success && {gcs} | grep success",
    ]
    assert worker["livenessProbe"]["exec"]["command"] == ["bash", "-c", f"{raylet} | grep success"]
    assert "httpGet" not in worker["readinessProbe"]


def test_the_ports_follow_ray_start_params() -> None:
    head, worker = _pods("2.60.0", **{"dashboard-agent-listen-port": "52999"})
    assert head["readinessProbe"]["httpGet"]["port"] == 52999
    assert worker["livenessProbe"]["httpGet"]["port"] == 52999
    old_head, _ = _pods("2.40.0", **{"dashboard-port": "8266"})
    assert "localhost:8266/api/gcs_healthz" in old_head["readinessProbe"]["exec"]["command"][2]


@pytest.mark.parametrize(
    ("version", "unified"),
    [
        ("2.53.0", True),
        ("2.60.0", True),
        ("3.0", True),
        ("v2.53.1", True),
        ("2.52.9", False),
        ("2.9.3", False),
        ("", False),
        (None, False),
        ("latest", False),
    ],
)
def test_the_ray_version_switch_is_kuberays(version: str | None, unified: bool) -> None:
    """KubeRay parses rayVersion as a generic version; what does not parse is "older"."""
    assert unified_health(version) is unified


def test_a_users_own_probes_are_kept_each_kind_on_its_own() -> None:
    obj = cluster_dict(rayVersion="2.60.0")
    mine = {"tcpSocket": {"port": 6379}, "periodSeconds": 3}
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["readinessProbe"] = mine
    head = build_head_pod(load_cluster(obj))["spec"]["containers"][0]
    assert head["readinessProbe"] == mine
    assert head["livenessProbe"]["httpGet"]["path"] == "/api/healthz"


def test_the_opt_out_injects_none() -> None:
    """KubeRay's ENABLE_PROBES_INJECTION=false (PlanOptions.inject_probes)."""
    cluster = load_cluster(cluster_dict(rayVersion="2.60.0"))
    head = build_head_pod(cluster, inject_probes=False)["spec"]["containers"][0]
    worker = worker_pod(cluster, host=1, inject_probes=False)["spec"]["containers"][0]
    for container in (head, worker):
        assert "readinessProbe" not in container
        assert "livenessProbe" not in container


def test_only_the_ray_container_is_probed() -> None:
    """Sidecars (the autoscaler) are the user's business, as under KubeRay."""
    cluster = load_cluster(cluster_dict(rayVersion="2.60.0", enableInTreeAutoscaling=True))
    containers = build_head_pod(cluster)["spec"]["containers"]
    assert len(containers) == 2
    assert "readinessProbe" in containers[0]
    assert "readinessProbe" not in containers[1]
