"""Rule 13b, planned without a server: a ComputeDomain per GB200 slice, its channel claimed by
every pod of the slice, the slice ready only with its domain Ready, the domain deleted once
its slice's pods are gone; nothing of it without ComputeDomains served, and a Warning."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime

from raycluster_operator.accelerators import wants_compute_domains
from raycluster_operator.api.models import load_cluster
from raycluster_operator.planning import ClusterState, PassPlan, plan_pass
from tests.harness.objects import Obj

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def gb200(replicas: int = 2, **annotations: str) -> Obj:
    template: Obj = {
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-GB200"},
            "containers": [
                {"name": "w", "image": "ray", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
            ],
        }
    }
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "gb", "namespace": "default", "uid": "u-1"},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "h", "image": "ray"}]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "nvl",
                    "replicas": replicas,
                    "numOfHosts": 4,
                    "rayStartParams": {},
                    "template": template,
                }
            ],
        },
    }


def plan(cluster: Obj, pods: Sequence[Obj] = (), domains: Sequence[Obj] | None = ()) -> PassPlan:
    suffixes = (f"s{i:04d}"[:5] for i in itertools.count())
    objects = {} if domains is None else {"ComputeDomain": list(domains)}
    state = ClusterState(cluster=cluster, pods=list(pods), objects=objects)
    return plan_pass(state, now=NOW, new_suffix=lambda: next(suffixes))


def running(create_manifest: Obj, name: str) -> Obj:
    """The pod a create becomes, running and ready."""
    meta = {**create_manifest["metadata"], "name": name, "uid": name}
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "w", "ready": True, "state": {"running": {}}}],
    }
    return {**create_manifest, "metadata": meta, "status": status}


def domains_in(result: PassPlan) -> list[Obj]:
    return [o for o in result.objects if o["kind"] == "ComputeDomain"]


def domain(manifest: Obj, ready: bool) -> Obj:
    return {
        **manifest,
        "metadata": {**manifest["metadata"], "uid": manifest["metadata"]["name"]},
        "status": {"status": "Ready" if ready else "NotReady"},
    }


def test_auto_wants_domains_for_every_multi_host_nvlink_group() -> None:
    """What NVIDIA's examples key a multi-node NVLink workload on is the clique the operator
    already holds a slice in, not a product label (GKE spells it differently, many write none)."""
    group = load_cluster(gb200()).spec.worker_group_specs[0]
    assert wants_compute_domains(group)
    off = load_cluster(gb200(**{"raycluster-operator.io/compute-domain": "false"}))
    assert not wants_compute_domains(off.spec.worker_group_specs[0])
    for selector in ({}, {"cloud.google.com/gke-accelerator": "nvidia-gb200"}):
        plain = gb200()
        plain["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] = selector
        assert wants_compute_domains(load_cluster(plain).spec.worker_group_specs[0])
    # Hosts kept together by another label are not one NVLink domain; one host needs none.
    rack = gb200(**{"ray.io/multi-host-topology-key": "example.com/rack"})
    assert not wants_compute_domains(load_cluster(rack).spec.worker_group_specs[0])
    single = gb200()
    single["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 1
    assert not wants_compute_domains(load_cluster(single).spec.worker_group_specs[0])
    forced = gb200(**{"raycluster-operator.io/compute-domain": "true"})
    assert wants_compute_domains(load_cluster(forced).spec.worker_group_specs[0])
    own = gb200()
    own["spec"]["workerGroupSpecs"][0]["template"]["spec"]["resourceClaims"] = [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "mine"}
    ]
    assert not wants_compute_domains(load_cluster(own).spec.worker_group_specs[0])


def test_an_unknown_mode_is_an_invalid_spec() -> None:
    result = plan(gb200(**{"raycluster-operator.io/compute-domain": "yes"}))
    assert [c.group for c in result.creates] == ["headgroup"]  # the group is left alone
    invalid = [e for e in result.events if e.reason == "InvalidSpec"]
    assert 'must be "auto", "true" or "false"' in invalid[0].message


def test_each_new_slice_gets_its_domain_and_every_pod_its_channel() -> None:
    result = plan(gb200())
    workers = [c for c in result.creates if c.group == "nvl"]
    assert len(workers) == 8
    domains = [o for o in result.objects if o["kind"] == "ComputeDomain"]
    replicas = {c.replica_name for c in workers}
    assert {d["metadata"]["name"] for d in domains} == {f"gb-{r}" for r in replicas}
    for d in domains:
        assert d["spec"] == {
            "numNodes": 4,
            "channel": {
                "resourceClaimTemplate": {"name": d["metadata"]["name"]},
                "allocationMode": "Single",
            },
        }
        assert d["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    for c in workers:
        spec = c.manifest["spec"]
        assert spec["resourceClaims"] == [
            {"name": "compute-domain-channel", "resourceClaimTemplateName": f"gb-{c.replica_name}"}
        ]
        assert spec["containers"][0]["resources"]["claims"] == [{"name": "compute-domain-channel"}]
        assert f"ray.io/gpu-domain=gb-{c.replica_name}" in " ".join(spec["containers"][0]["args"])
    head = next(c for c in result.creates if c.group == "headgroup")
    assert "resourceClaims" not in head.manifest["spec"]


def test_a_slice_is_ready_only_with_its_domain_ready_and_its_domain_goes_with_it() -> None:
    first = plan(gb200(replicas=1))
    pods = [running(c.manifest, f"p{i}") for i, c in enumerate(first.creates)]
    made = [o for o in first.objects if o["kind"] == "ComputeDomain"]

    def group_status(result: PassPlan) -> Obj:
        assert result.status is not None
        return next(g for g in result.status["workerGroups"] if g["groupName"] == "nvl")

    waiting = plan(gb200(replicas=1), pods, [domain(made[0], ready=False)])
    assert group_status(waiting)["readySlices"] == 0
    assert not waiting.creates and not domains_in(waiting) and not waiting.object_deletes
    served = plan(gb200(replicas=1), pods, [domain(made[0], ready=True)])
    assert group_status(served)["readySlices"] == 1
    assert not served.creates and not served.object_deletes
    # Scaled to 0: the pods go first; the domain once none is left.
    scaled = plan(gb200(replicas=0), pods, [domain(made[0], ready=True)])
    assert len(scaled.deletes) == 4 and not scaled.object_deletes
    heads = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    gone = plan(gb200(replicas=0), heads, [domain(made[0], ready=True)])
    assert gone.object_deletes == (("ComputeDomain", made[0]["metadata"]["name"]),)


def test_without_compute_domains_served_slices_run_without_and_say_so() -> None:
    result = plan(gb200(), domains=None)
    workers = [c for c in result.creates if c.group == "nvl"]
    assert len(workers) == 8
    assert not [o for o in result.objects if o["kind"] == "ComputeDomain"]
    assert all("resourceClaims" not in c.manifest["spec"] for c in workers)
    warnings = [e for e in result.events if e.reason == "ComputeDomainsUnavailable"]
    assert len(warnings) == 2 and all(e.type == "Warning" for e in warnings)


def test_a_slice_whose_domain_is_gone_is_replaced_whole_with_a_fresh_one() -> None:
    """Deleted under the slice (or its creation failed): the pods claim channels from a domain
    that is no more, and a new one under them would never be joined, so the slice goes whole
    and the replacement gets its own. Just created (vouched, not yet cached): nothing."""
    first = plan(gb200(replicas=1))
    pods = [running(c.manifest, f"p{i}") for i, c in enumerate(first.creates)]
    (made,) = domains_in(first)
    name = made["metadata"]["name"]

    lost = plan(gb200(replicas=1), pods, [])
    assert len(lost.deletes) == 4
    assert {d.reason for d in lost.deletes} == {"ComputeDomainLost"}
    assert any(e.reason == "ComputeDomainLost" and name in e.message for e in lost.events)
    deleting = domain(made, ready=True)
    deleting["metadata"] = {**deleting["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    assert len(plan(gb200(replicas=1), pods, [deleting]).deletes) == 4

    state = ClusterState(
        cluster=gb200(replicas=1),
        pods=pods,
        objects={"ComputeDomain": []},
        present=frozenset({("ComputeDomain", name)}),
    )
    fresh = plan_pass(state, now=NOW, new_suffix=lambda: "s9999")
    assert not fresh.deletes and not fresh.object_deletes


def test_slices_made_without_a_domain_are_left_alone_once_domains_are_served() -> None:
    """Created while ComputeDomains were not served (no channel claims), then the driver is
    installed: those slices run on; only new slices get domains."""
    first = plan(gb200(replicas=1), domains=None)
    pods = [running(c.manifest, f"p{i}") for i, c in enumerate(first.creates)]
    later = plan(gb200(replicas=1), pods, [])
    assert not later.deletes and not domains_in(later)
