"""Everything we ship or build, checked against Kubernetes' own OpenAPI schemas.

`kubernetes-validate` (PyPI) carries the official schemas of each Kubernetes release; strict
mode also refuses fields a release does not know. Checked: every manifest under deploy/ and
every overlay as kustomize renders it; every pod, service, ServiceAccount, Role and
RoleBinding the builders produce for the examples and for random valid inputs. A deliberately
broken builder input proves the check can fail.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_validate import utils as kv

import kustomize_render
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import (
    build_autoscaler_rbac,
    build_head_pod,
    build_head_service,
    build_headless_service,
    needs_headless_service,
)
from tests.builders.conftest import worker_pod

ROOT = Path(__file__).parents[1]
# The oldest and newest Kubernetes releases we support (kubectl 1.37 is the newest tested).
SUPPORTED = ("1.30.0", "1.37.0")  # schema directories v1.30.0-local-strict, ...
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
OVERLAYS = ["base", "overlays/cluster", "overlays/namespaced", "overlays/dev"]


@functools.cache
def validator(version: str, api_version: str, kind: str) -> jsonschema.Validator:
    """The strict schema of one kind in one release, as `kubernetes_validate.validate` builds
    it, kept: that function reloads the (large) shared definitions on every call."""
    directory = f"kubernetes-json-schema/v{version}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = kv.schema_contents(f"{directory}/{kind.lower()}-{group}.json", version)
    definitions = kv.schema_contents(f"{directory}/_definitions.json", version)
    registry = kv.Resource.from_contents(definitions) @ (
        kv.Resource.from_contents(schema) @ kv.Registry()
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check(obj: dict[str, Any]) -> None:
    """Valid, with no unknown field, in every supported release."""
    for version in SUPPORTED:
        errors = list(validator(version, obj["apiVersion"], obj["kind"]).iter_errors(obj))
        if errors:
            meta = obj.get("metadata") or {}
            name = meta.get("name") or meta.get("generateName")
            where = "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
            raise AssertionError(f"{obj.get('kind')} {name} in Kubernetes {version}: {where}")


def test_the_cached_check_agrees_with_kubernetes_validate() -> None:
    pod = built_objects(documents(ROOT / "examples" / "cpu.yaml")[0])[0]
    check(pod)
    kubernetes_validate.validate(pod, SUPPORTED[-1], strict=True)
    pod["spec"]["hostNetwork"] = "yes"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, SUPPORTED[-1], strict=True)
    with pytest.raises(AssertionError, match="hostNetwork"):
        check(pod)


def built_objects(raycluster: dict[str, Any]) -> list[dict[str, Any]]:
    """What the operator creates for a RayCluster: head, one whole slice per group, services,
    the autoscaler's ServiceAccount, Role and RoleBinding."""
    obj = {**raycluster, "metadata": {"namespace": "default", "uid": "0", **raycluster["metadata"]}}
    cluster = load_cluster(obj)
    objects = [build_head_pod(cluster), build_head_service(cluster)]
    if needs_headless_service(cluster):
        objects.append(build_headless_service(cluster))
    for group in cluster.spec.worker_group_specs:
        hosts = max(1, group.num_of_hosts)
        multi = hosts > 1
        for host in range(hosts):
            objects.append(worker_pod(cluster, group, host=host if multi else None))
    if (raycluster.get("spec") or {}).get("enableInTreeAutoscaling"):
        objects.extend(build_autoscaler_rbac(cluster))
    return objects


def documents(path: Path) -> list[dict[str, Any]]:
    return kustomize_render.documents(path.read_text())


@pytest.mark.parametrize(
    "path",
    # The Helm chart's templates are not manifests until Helm renders them: its CRDs are
    # checked here, its rendered objects by tests/test_install_helm.py.
    [
        p
        for p in sorted((ROOT / "deploy").rglob("*.yaml"))
        if p.name != "kustomization.yaml"
        and (ROOT / "deploy" / "helm" not in p.parents or p.parent.name == "crds")
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_manifest_in_deploy_is_valid(path: Path) -> None:
    for obj in documents(path):
        check(obj)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_valid_objects(overlay: str) -> None:
    for obj in kustomize_render.kustomize(ROOT / "deploy" / overlay):
        check(obj)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_what_the_builders_make_for_each_example_is_valid(path: Path) -> None:
    (raycluster,) = documents(path)
    # A RayJob's or RayService's example: the cluster its rayClusterSpec/rayClusterConfig makes.
    field = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}.get(raycluster["kind"])
    if field:
        raycluster = {**raycluster, "kind": "RayCluster", "spec": raycluster["spec"][field]}
    objects = built_objects(raycluster)
    assert {"Pod", "Service"} <= {o["kind"] for o in objects}
    for obj in objects:
        check(obj)


def test_the_autoscaler_rbac_is_valid() -> None:
    (raycluster,) = documents(ROOT / "examples" / "tpu-v5p-2x2x2-local.yaml")
    kinds = [o["kind"] for o in built_objects(raycluster)]
    assert {"ServiceAccount", "Role", "RoleBinding"} <= set(kinds)


names = st.from_regex(r"\A[a-z]([-a-z0-9]{0,40}[a-z0-9])?\Z")


@settings(max_examples=40, deadline=None)
@given(names, names, st.integers(1, 4), st.sampled_from(["tpu", "gpu", "cpu"]))
def test_what_the_builders_make_for_random_valid_inputs_is_valid(
    cluster: str, group: str, hosts: int, accelerator: str
) -> None:
    resources = {
        "tpu": {"google.com/tpu": "4"},
        "gpu": {"nvidia.com/gpu": "4"},
        "cpu": {"cpu": "1"},
    }[accelerator]
    raycluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": cluster},
        "spec": {
            "enableInTreeAutoscaling": hosts % 2 == 0,
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "head", "image": "ray"}]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": group,
                    "replicas": 1,
                    "numOfHosts": hosts,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "ray",
                                    "resources": {"limits": resources},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }
    for obj in built_objects(raycluster):
        check(obj)


def test_the_check_fails_on_an_invalid_field_a_builder_passes_through() -> None:
    """A template the builders copy verbatim, with a field of the wrong type: the pod they
    build is refused, naming the field."""
    (raycluster,) = documents(ROOT / "examples" / "cpu.yaml")
    template = raycluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    template["hostNetwork"] = "yes"
    template["containers"][0]["imagePullPolicy"] = 7
    workers = [o for o in built_objects(raycluster) if o["kind"] == "Pod"][1:]
    with pytest.raises(AssertionError, match=r"hostNetwork|imagePullPolicy"):
        check(workers[0])
    # And an unknown field is refused in strict mode.
    pod = build_head_pod(load_cluster({**raycluster, "metadata": {"name": "x", "uid": "0"}}))
    pod["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(AssertionError, match="imagePullPolicyy"):
        check(pod)


def test_a_gb200_slice_and_its_compute_domain_are_valid() -> None:
    """A GB200 slice as the planner makes it (rule 13b): its pods, which claim the domain's
    channel (resource claims as Kubernetes 1.34+ spell them: DRA's resource.k8s.io/v1), and
    its ComputeDomain, checked against NVIDIA's driver's CRD schema (the simulated driver
    installs the same); a wrong allocation mode proves that check can fail."""
    from datetime import UTC, datetime

    from devkube.addons.nvidia.crd import compute_domain_crd
    from raycluster_operator.planning import ClusterState, plan_pass

    (raycluster,) = documents(ROOT / "examples" / "gb200-nvl-18.yaml")
    group = raycluster["spec"]["workerGroupSpecs"][0]
    group["numOfHosts"] = 4
    raycluster["metadata"] = {**raycluster["metadata"], "namespace": "default", "uid": "0"}
    state = ClusterState(cluster=raycluster, objects={"ComputeDomain": []})
    plan = plan_pass(state, now=datetime.now(UTC), new_suffix=lambda: "bcdfg")
    pods = [c.manifest for c in plan.creates if c.group == group["groupName"]]
    domains = [o for o in plan.objects if o["kind"] == "ComputeDomain"]
    assert len(pods) == 4 and len(domains) == 1
    for pod in pods:
        assert pod["spec"]["resourceClaims"]
        errors = list(validator(SUPPORTED[-1], "v1", "Pod").iter_errors(pod))
        assert not errors, [e.message for e in errors]
    schema = compute_domain_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    domain_check = jsonschema.Draft202012Validator(schema)
    for domain in domains:
        assert not list(domain_check.iter_errors(domain))
        domain["spec"]["channel"]["allocationMode"] = "Some"
        assert list(domain_check.iter_errors(domain))
