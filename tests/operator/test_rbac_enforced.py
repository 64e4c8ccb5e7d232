"""The operator's RBAC as the dev cluster enforces it.

- `kubectl auth can-i --as=<the operator's ServiceAccount>` answers exactly what
  deploy/base/rbac.yaml grants: every (verb, resource) of the file, table-driven from the file
  itself, is "yes" (the Lease Role's only in the operator's namespace), and what the operator
  must not do is "no";
- the autoscaler Role the operator creates passes RBAC escalation prevention only because the
  operator holds what it grants (pods/resize is held for that alone: without it, refused);
- a grant taken away fails the running operator with kube's 403, and it recovers once the
  grant is back;
- the namespaced overlay's RBAC alone serves an operator scoped to its namespace.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from devkube.addons.nvidia.crd import compute_domain_crd
from kustomize_render import kustomize
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_autoscaler_rbac
from raycluster_operator.controller.manager import Manager
from raycluster_operator.kube import Kind, KubeClient, NotFound
from tests.harness.kubectl import Run, ok, refused, runner
from tests.harness.operator_world import (
    RunningOperator,
    World,
    cpu_group,
    eventually,
    fast_options,
    raycluster,
    ready,
)

DEPLOY = Path(__file__).parents[2] / "deploy"
NS = "raycluster-operator"
OPERATOR = f"system:serviceaccount:{NS}:{NS}"
AS_OPERATOR = f"--as={OPERATOR}"
SERVICES = Kind("", "v1", "Service", "services")


def _can_i_args(group: str, resource: str, verb: str) -> list[str]:
    """``resource`` is ``plural[/subresource][#name]``: a grant limited by resourceNames is
    asked about the name it names."""
    resource, _, name = resource.partition("#")
    base, _, sub = resource.partition("/")
    what = f"{base}.{group}" if group else base
    what = f"{what}/{name}" if name else what
    return [verb, what, *([f"--subresource={sub}"] if sub else [])]


def shipped() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(group, resource, verb) of deploy/base/rbac.yaml's ClusterRole and of its Lease Role."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "base" / "rbac.yaml").read_text()) if d]

    def expand(rules: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        return [
            (g, f"{r}#{n}" if n else r, v)
            for rule in rules
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for n in rule.get("resourceNames") or [""]
            for v in rule["verbs"]
        ]

    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    (lease_role,) = [d for d in docs if d["kind"] == "Role"]
    return expand(cluster_role["rules"]), expand(lease_role["rules"])


#: What the operator must not be able to do (the RayCluster spec, other kinds, other scopes).
DENIED = [
    ("ray.io", "rayclusters", "update", "team-a"),
    # rayclusters create is granted: the RayJob controller creates a RayJob's cluster.
    ("ray.io", "rayclusters/status", "update", "team-a"),
    ("", "pods", "update", "team-a"),
    ("", "pods/status", "patch", "team-a"),
    ("", "services", "delete", "team-a"),
    ("", "secrets", "get", "team-a"),
    ("", "configmaps", "list", "team-a"),
    # Host-loss failover reads nodes (get/list/watch, in the shipped table) and never writes them.
    ("", "nodes", "update", ""),
    ("", "nodes", "patch", ""),
    ("", "nodes", "delete", ""),
    ("", "nodes/status", "patch", ""),
    ("rbac.authorization.k8s.io", "roles", "delete", "team-a"),
    ("rbac.authorization.k8s.io", "clusterroles", "create", ""),
    ("rbac.authorization.k8s.io", "roles", "escalate", "team-a"),
    ("rbac.authorization.k8s.io", "roles", "bind", "team-a"),
    ("coordination.k8s.io", "leases", "get", "team-a"),
    ("", "users", "impersonate", ""),
]


async def admin(world: World, tmp_path: Path) -> Run:
    path = tmp_path / "admin"
    path.write_text(yaml.safe_dump(world.cluster.kubeconfig_dict()))
    return runner(path)


async def install_from_file(kubectl: Run) -> None:
    await ok(kubectl, "create", "namespace", NS)
    await ok(kubectl, "create", "namespace", "team-a")
    await ok(kubectl, "apply", "-f", str(DEPLOY / "base" / "rbac.yaml"))


async def test_can_i_for_the_operator_matches_deploy_rbac(world: World, tmp_path: Path) -> None:
    kubectl = await admin(world, tmp_path)
    await install_from_file(kubectl)
    # ComputeDomains (rule 13b) are served where NVIDIA's DRA driver is installed: kubectl
    # resolves a resource it asks about through discovery.
    await world.cluster.apply(compute_domain_crd())
    cluster_grants, lease_grants = shipped()
    table = [(g, r, v, "team-a", "yes") for g, r, v in cluster_grants]
    table += [(g, r, v, NS, "yes") for g, r, v in lease_grants]
    table += [(g, r, v, ns, "no") for g, r, v, ns in DENIED]
    wrong = []
    for group, resource, verb, ns, want in table:
        scope = ["-n", ns] if ns else []
        done = await kubectl(
            "auth", "can-i", *_can_i_args(group, resource, verb), *scope, AS_OPERATOR
        )
        if done.stdout.strip() != want:
            wrong.append((group, resource, verb, ns, want, done.stdout.strip(), done.stderr))
    assert not wrong, wrong
    assert len(table) > 30


def _autoscaler_role(name: str) -> dict[str, Any]:
    obj = raycluster(name, [cpu_group("w", replicas=1)], autoscaling=True)
    obj["metadata"].update(namespace="team-a", uid="0")
    (role,) = [o for o in build_autoscaler_rbac(load_cluster(obj)) if o["kind"] == "Role"]
    role["metadata"].pop("ownerReferences", None)
    return role


async def test_the_autoscaler_role_needs_what_the_operator_holds_for_it(
    world: World, tmp_path: Path
) -> None:
    kubectl = await admin(world, tmp_path)
    await install_from_file(kubectl)
    await ok(kubectl, "create", "-f", "-", AS_OPERATOR, input=json.dumps(_autoscaler_role("one")))

    # Without pods/resize (held only to grant it), the same Role is refused, as in production.
    role = yaml.safe_load(await ok(kubectl, "get", "clusterrole", NS, "-o", "yaml"))
    role["rules"] = [r for r in role["rules"] if r["resources"] != ["pods/resize"]]
    await ok(kubectl, "replace", "-f", "-", input=json.dumps(role))
    refusal = await refused(
        kubectl, "create", "-f", "-", AS_OPERATOR, input=json.dumps(_autoscaler_role("two"))
    )
    assert refusal.endswith(
        f'roles.rbac.authorization.k8s.io "two" is forbidden: user "{OPERATOR}" '
        f'(groups=["system:serviceaccounts" "system:serviceaccounts:{NS}" '
        '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        '{APIGroups:[""], Resources:["pods/resize"], Verbs:["patch"]}'
    ), refusal


async def test_a_grant_taken_away_fails_the_operator_until_it_is_back(
    world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kubectl = await admin(world, tmp_path)
    # It installs deploy/'s RBAC and runs as its ServiceAccount. A Forbidden write is terminal:
    # the cluster waits for its next change or the periodic resync, and the grant coming back
    # changes neither, so the resync is what brings it back (2 s here, not the world's 30 s).
    await world.start_operator(resync_period=2.0)
    role = yaml.safe_load(await ok(kubectl, "get", "clusterrole", NS, "-o", "yaml"))
    full = json.dumps(role)
    role["rules"] = [r for r in role["rules"] if r["resources"] != ["services"]]
    await ok(kubectl, "replace", "-f", "-", input=json.dumps(role))
    caplog.set_level(logging.WARNING, logger="raycluster_operator")
    await world.apply(raycluster("denied", [cpu_group("w", replicas=1)]))
    message = (
        f'services is forbidden: User "{OPERATOR}" cannot create resource "services" in API '
        'group "" in the namespace "default"'
    )

    def refused_in_log() -> None:
        assert any(message in r.getMessage() for r in caplog.records)

    await eventually(refused_in_log)
    with pytest.raises(NotFound):
        await world.kube.get(SERVICES, "default", "denied-head-svc")

    restored = json.loads(full)
    restored["metadata"].pop("resourceVersion", None)
    await ok(kubectl, "apply", "-f", "-", input=json.dumps(restored))

    async def service_created() -> None:
        services = await world.kube.list(SERVICES, "default")
        assert any(s["metadata"]["name"].startswith("denied") for s in services.items)

    await eventually(service_created, within=30)


async def test_the_namespaced_install_is_enough_for_a_namespaced_operator(
    world: World, tmp_path: Path
) -> None:
    """The namespaced overlay's RBAC (a Role in `ray`, the Lease Role, the node reader) for
    `run --namespace ray`
    with leader election: the operator converges an autoscaling cluster with it alone."""
    kubectl = await admin(world, tmp_path)
    await ok(kubectl, "create", "namespace", NS)
    await ok(kubectl, "create", "namespace", "ray")
    rbac = [
        d
        for d in kustomize(DEPLOY / "overlays" / "namespaced")
        if d["kind"]
        in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    ]
    # Cluster-wide, only the node reader (host-loss failover watches Nodes).
    assert {d["kind"] for d in rbac} == {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
    }
    assert {d["metadata"]["name"] for d in rbac if d["kind"].startswith("Cluster")} == {
        "raycluster-operator-nodes"
    }
    path = tmp_path / "namespaced-rbac.yaml"
    path.write_text(yaml.safe_dump_all(rbac))
    await ok(kubectl, "apply", "-f", str(path))
    config = await world.cluster.service_account_kubeconfig(NS, NS)
    client = KubeClient.from_kubeconfig(config)
    options = fast_options(
        namespaces=("ray",), leader_elect=True, lease_namespace=NS, lease_name="ns-lease"
    )
    manager = Manager(client, options)
    op = RunningOperator(manager, client, asyncio.create_task(manager.run()))
    world.operators.append(op)
    obj = raycluster("scoped", [cpu_group("w", replicas=1)], autoscaling=True)
    obj["metadata"]["namespace"] = "ray"
    await world.cluster.apply(obj, namespace="ray")

    async def converged() -> None:
        pods = await world.pods("scoped", "ray")
        assert len(pods) == 2 and all(ready(p) for p in pods), [p["metadata"]["name"] for p in pods]
        status = (await world.get_cluster("scoped", "ray")).get("status") or {}
        assert status.get("state") == "ready"

    await eventually(converged, within=30)
