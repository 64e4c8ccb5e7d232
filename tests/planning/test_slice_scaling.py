"""Rule 7b's Warning: TPU groups that Ray's slice reservations cannot scale, and why.

The TPU group a KubeRay user writes (GKE nodeSelectors, `google.com/tpu`, numOfHosts,
autoscaler v2) gets no warning; each spec below gets one sentence naming the fix, as one
Warning Event per applied generation, and on every `raycluster-operator plan`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from raycluster_operator.api.models import load_cluster
from raycluster_operator.cli import main
from raycluster_operator.planning.features.slice_scaling import slice_scaling_gaps

from .cluster import cluster_obj, plan_for
from .world import BASE, suffixes

REASON = "SliceReservationsCannotScale"


def tpu_group(**fields: Any) -> dict[str, Any]:
    limits = {"cpu": "1", "memory": "1Gi", "google.com/tpu": "4"}
    container = {"name": "ray-worker", "image": "rayproject/ray:2.60.0", "resources": {}}
    container["resources"] = {"limits": limits, "requests": limits}
    group: dict[str, Any] = {
        "groupName": "tpu",
        "replicas": 0,
        "minReplicas": 0,
        "maxReplicas": 2,
        "numOfHosts": 2,
        "template": {
            "spec": {
                "nodeSelector": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v5p-slice",
                    "cloud.google.com/gke-tpu-topology": "2x2x2",
                },
                "containers": [container],
            }
        },
    }
    group.update(fields)
    return group


V2: dict[str, Any] = {"enableInTreeAutoscaling": True, "autoscalerOptions": {"version": "v2"}}


def gaps(group: dict[str, Any], **spec: Any) -> list[str]:
    return slice_scaling_gaps(load_cluster(cluster_obj(group, **{**V2, **spec})))


def test_the_spec_a_kuberay_user_writes_scales() -> None:
    assert gaps(tpu_group()) == []
    assert gaps(tpu_group(), rayVersion="2.60.0") == []
    # Group labels the autoscaler can use are fine (rule 3.4a keeps each host's own true).
    assert gaps(tpu_group(labels={"ray.io/tpu-pod-type": "v5p-16"})) == []
    # Without in-tree autoscaling nothing scales by demand, by the user's choice: no warning.
    no_autoscaling = load_cluster(cluster_obj(tpu_group()))
    assert slice_scaling_gaps(no_autoscaling) == []


def test_each_unscalable_spec_is_told_why() -> None:
    selector_less = tpu_group()
    del selector_less["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"]
    cases = {
        "nodeSelectors": gaps(selector_less),
        "version: v2": gaps(tpu_group(), autoscalerOptions={"version": "v1"}),
        "maxReplicas is 0": gaps(tpu_group(maxReplicas=0)),
        "v5p-8, but its slices are v5p-16": gaps(
            tpu_group(labels={"ray.io/tpu-pod-type": "v5p-8"})
        ),
        "worker 0": gaps(tpu_group(labels={"ray.io/tpu-worker-id": "1"})),
        "spec.rayVersion is 2.59.0": gaps(tpu_group(), rayVersion="2.59.0"),
    }
    for needle, found in cases.items():
        assert len(found) == 1, (needle, found)
        assert found[0].startswith("group tpu: slice reservations"), found
        assert needle in found[0], (needle, found)


def test_one_warning_event_per_applied_generation() -> None:
    obj = cluster_obj(tpu_group(maxReplicas=0), **V2)

    def events(observed: int | None, generation: int) -> list[str]:
        obj["metadata"]["generation"] = generation
        obj["status"] = {} if observed is None else {"observedGeneration": observed}
        plan = plan_for(load_cluster(obj), [], now=BASE, new_suffix=suffixes())
        return [e.message for e in plan.events if e.reason == REASON]

    assert len(events(None, 1)) == 1  # never observed
    assert events(1, 1) == []  # this generation was seen: quiet
    assert len(events(1, 2)) == 1  # the spec was applied again


def test_plan_prints_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "rc.yaml"
    path.write_text(yaml.safe_dump(cluster_obj(tpu_group(maxReplicas=0), **V2)))
    table = CliRunner().invoke(main, ["plan", "-f", str(path)])
    assert table.exit_code == 0, table.output
    assert "Slice reservations:" in table.output
    assert "Warning: group tpu: slice reservations" in table.output
    assert "maxReplicas is 0" in table.output
    body = json.loads(CliRunner().invoke(main, ["plan", "-f", str(path), "-o", "json"]).output)
    assert [e["reason"] for e in body["events"]].count(REASON) == 1
    assert len(body["sliceReservations"]) == 1
    path.write_text(yaml.safe_dump(cluster_obj(tpu_group(), **V2)))
    fine = CliRunner().invoke(main, ["plan", "-f", str(path)])
    assert "Slice reservations" not in fine.output
