"""Reading pods, quantities and spec problems: the small judgements the rules rest on."""

from __future__ import annotations

from fractions import Fraction

from raycluster_operator.planning.pods import parse_index, read_pod
from raycluster_operator.planning.resources import format_bytes, format_decimal, pod_resources
from raycluster_operator.planning.spec_check import check_spec

from .cluster import cluster, cluster_obj, worker_group
from .world import make_pod


def test_index_labels_must_be_plain_non_negative_decimals() -> None:
    assert [parse_index(v) for v in ("0", "17", "-1", "1.0", "", None, "٣")] == [
        0,
        17,
        None,
        None,
        None,
        None,
        None,
    ]


def test_a_pod_is_failed_by_phase_or_by_its_ray_container_under_restart_never() -> None:
    assert read_pod(make_pod("a", state="failed")).failed
    assert read_pod(make_pod("a", state="succeeded")).failed
    assert read_pod(make_pod("a", state="crashed")).failed
    restarting = make_pod("a", state="crashed")
    restarting["spec"]["restartPolicy"] = "Always"
    assert not read_pod(restarting).failed  # the kubelet restarts it: not KubeRay's failure
    assert not read_pod(make_pod("a", state="pending")).failed


def test_terminating_pods_are_not_live_and_keep_their_deadline() -> None:
    pod = read_pod(make_pod("a", state="terminating", created=5))
    assert pod.terminating and not pod.live and not pod.running_and_ready
    assert pod.deletion_deadline == "2026-01-01T00:00:06Z"


def test_pod_resources_use_the_request_else_the_limit_per_container() -> None:
    template = {
        "spec": {
            "containers": [
                {
                    "resources": {
                        "requests": {"cpu": "500m"},
                        "limits": {"cpu": "2", "memory": "1Gi"},
                    }
                },
                {"resources": {"limits": {"nvidia.com/gpu": 4}}},
            ]
        }
    }
    assert pod_resources(template) == {
        "cpu": Fraction(1, 2),
        "memory": Fraction(2**30),
        "nvidia.com/gpu": Fraction(4),
    }


def test_quantities_are_formatted_like_kubernetes() -> None:
    assert format_decimal(Fraction(9, 2)) == "4500m"
    assert format_decimal(Fraction(32)) == "32"
    assert format_bytes(Fraction(9 * 2**30)) == "9Gi"
    assert format_bytes(Fraction(512 * 2**20)) == "512Mi"
    assert format_bytes(Fraction(1000)) == "1000"


def test_group_problems_stop_only_their_group() -> None:
    spec = cluster(worker_group("ok", replicas=1), worker_group("bad", numOfHosts=0))
    check = check_spec(spec)
    assert check.invalid_groups == frozenset({1})
    assert not check.cluster_problems and not check.ok


def test_problems_outside_groups_stop_the_cluster() -> None:
    obj = cluster_obj(worker_group(replicas=1))
    obj["spec"]["headGroupSpec"]["template"]["spec"]["containers"] = []
    from raycluster_operator.api.models import load_cluster

    check = check_spec(load_cluster(obj))
    assert check.cluster_problems and check.invalid_groups == frozenset()
