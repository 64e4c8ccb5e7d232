"""Template identity: scaling never changes a group's hash; anything that shapes its pods does."""

from __future__ import annotations

from typing import Any

import pytest

from raycluster_operator.api import labels
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_head_pod
from raycluster_operator.builders.template_hash import head_template_hash, worker_template_hash

from .conftest import cluster_dict, worker_pod


def _hashes(raw: dict[str, Any]) -> tuple[str, str]:
    cluster = load_cluster(raw)
    return worker_template_hash(cluster, cluster.spec.worker_group_specs[0]), head_template_hash(
        cluster
    )


def _group(raw: dict[str, Any]) -> dict[str, Any]:
    group: dict[str, Any] = raw["spec"]["workerGroupSpecs"][0]
    return group


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("replicas", 9),
        ("minReplicas", 0),
        ("maxReplicas", 40),
        ("scaleStrategy", {"workersToDelete": ["some-pod"]}),
        ("suspend", True),
        ("idleTimeoutSeconds", 120),
        ("maxUnavailable", 2),
    ],
)
def test_counting_fields_leave_both_hashes_alone(field: str, value: Any) -> None:
    raw = cluster_dict()
    before = _hashes(raw)
    _group(raw)[field] = value
    assert _hashes(raw) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda g: g["template"]["spec"]["containers"][0].__setitem__("image", "ray:next"),
        lambda g: g.__setitem__("numOfHosts", 2),
        lambda g: g["rayStartParams"].__setitem__("num-cpus", "3"),
        lambda g: g["template"]["metadata"]["labels"].__setitem__("team", "infra"),
    ],
    ids=["image", "numOfHosts", "rayStartParams", "template-label"],
)
def test_a_shaping_change_changes_the_worker_hash_only(change: Any) -> None:
    raw = cluster_dict()
    worker, head = _hashes(raw)
    change(_group(raw))
    new_worker, new_head = _hashes(raw)
    assert new_worker != worker
    assert new_head == head


def test_the_gcs_port_shapes_both() -> None:
    raw = cluster_dict()
    worker, head = _hashes(raw)
    raw["spec"]["headGroupSpec"]["rayStartParams"]["port"] = "7000"
    new_worker, new_head = _hashes(raw)
    assert new_worker != worker
    assert new_head != head


def test_every_built_pod_carries_its_hash_beside_the_template_annotations() -> None:
    cluster = load_cluster(cluster_dict())
    group = cluster.spec.worker_group_specs[0]
    worker = worker_pod(cluster, group, host=1, replica_name="tpu-x")
    head = build_head_pod(cluster)
    annotations = worker["metadata"]["annotations"]
    assert annotations[labels.POD_TEMPLATE_HASH_ANNOTATION] == worker_template_hash(cluster, group)
    assert annotations["note"] == "x"
    assert head["metadata"]["annotations"][
        labels.POD_TEMPLATE_HASH_ANNOTATION
    ] == head_template_hash(cluster)


def test_kuberays_crd_defaults_leave_both_hashes_alone() -> None:
    """kube-apiserver applies a CRD's defaults when it reads a stored object: once KubeRay's
    CRD replaces ours, a cluster reads with `priority: 0`, a port's `protocol: TCP` and a
    reference's `name: ""`, which mean what their absence means. Its pods stay current."""
    raw = cluster_dict()
    groups = (_group(raw), raw["spec"]["headGroupSpec"])
    for group in groups:
        container = group["template"]["spec"]["containers"][0]
        container["ports"] = [{"containerPort": 6379}]
        container["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"key": "k"}}}]
    before = _hashes(raw)
    _group(raw)["priority"] = 0
    for group in groups:
        container = group["template"]["spec"]["containers"][0]
        container["ports"][0]["protocol"] = "TCP"
        container["env"][0]["valueFrom"]["secretKeyRef"]["name"] = ""
    assert _hashes(raw) == before
    _group(raw)["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "SCTP"
    assert _hashes(raw)[0] != before[0]
    raw["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = (
        "UDP"
    )
    assert _hashes(raw)[1] != before[1]


def test_fields_the_models_do_not_declare_leave_both_hashes_alone() -> None:
    """KubeRay's fields our schema lacks: the builders never read them, our CRD prunes them."""
    raw = cluster_dict()
    before = _hashes(raw)
    _group(raw)["priority"] = 3
    raw["spec"]["headGroupSpec"]["ingressOptions"] = {"ingressClassName": "nginx"}
    raw["spec"]["autoscalerOptions"] = {"command": ["x"]}
    after = _hashes(raw)
    assert after[0] == before[0]
    raw["spec"]["autoscalerOptions"] = {}
    assert _hashes(raw)[1] == after[1]


def _recreate_hash(raw: dict[str, Any]) -> str:
    annotations = build_head_pod(load_cluster(raw))["metadata"]["annotations"]
    value: str = annotations[labels.UPGRADE_STRATEGY_RECREATE_HASH_ANNOTATION]
    return value


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["workerGroupSpecs"][0].__setitem__("replicas", 9),
        lambda s: s["workerGroupSpecs"][0].__setitem__("minReplicas", 0),
        lambda s: s["workerGroupSpecs"][0].__setitem__("maxReplicas", 40),
        lambda s: s["workerGroupSpecs"][0].__setitem__(
            "scaleStrategy", {"workersToDelete": ["some-pod"]}
        ),
        lambda s: s["workerGroupSpecs"][0]["template"]["spec"].__setitem__(
            "tolerations", [{"key": "kueue", "operator": "Exists"}]
        ),
        lambda s: (
            s["headGroupSpec"]["template"]
            .setdefault("spec", {})
            .__setitem__("schedulingGates", [{"name": "kueue.x-k8s.io/admission"}])
        ),
        lambda s: s.__setitem__("upgradeStrategy", {"type": "Recreate"}),
    ],
    ids=["replicas", "min", "max", "workersToDelete", "tolerations", "gates", "strategy"],
)
def test_kuberays_recreate_hash_leaves_out_what_kuberay_mutes(change: Any) -> None:
    """The head carries KubeRay's `ray.io/upgrade-strategy-recreate-hash`: its whole-spec
    hash without the fields KubeRay mutes (what an autoscaler or Kueue writes)."""
    raw = cluster_dict()
    before = _recreate_hash(raw)
    change(raw["spec"])
    assert _recreate_hash(raw) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.__setitem__("rayVersion", "2.51.0"),
        lambda s: s["workerGroupSpecs"][0]["template"]["spec"]["containers"][0].__setitem__(
            "image", "ray:next"
        ),
        lambda s: s["headGroupSpec"]["rayStartParams"].__setitem__("num-cpus", "0"),
    ],
    ids=["rayVersion", "worker-image", "head-params"],
)
def test_kuberays_recreate_hash_changes_with_the_spec(change: Any) -> None:
    raw = cluster_dict()
    before = _recreate_hash(raw)
    change(raw["spec"])
    after = _recreate_hash(raw)
    assert after != before
    assert len(after) == 32 and after.isalnum()  # KubeRay's form: base32hex of a SHA-1
