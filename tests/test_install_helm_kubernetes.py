"""The Helm chart on Kubernetes' own control plane (kube-apiserver, kube-controller-manager,
kube-scheduler, etcd; our kubelets as nodes), driven by real helm and kubectl as a user does:
install, a RayCluster's TPU slice Ready, an upgrade that changes `resources` rolls the
Deployment, uninstall leaves nothing but the CRDs; the RBAC of a cluster-wide install against a
`watchNamespace` one, asked of the API server with `kubectl auth can-i`; and an install beside
CRDs another manager owns (KubeRay's chart).

The operator runs in-cluster as the chart's Deployment: its pods are local processes (the dev
cluster's process runtime) running this checkout's `raycluster-operator`, configured from their
mounted ServiceAccount token, so they hold exactly the chart's RBAC, one of them leading.
(Run under `flock /tmp/realray.lock`: process-runtime pod IPs are per machine.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devkube import DevCluster
from raycluster_operator.controller import install
from raycluster_operator.controller.crds import crd_manifest
from tests.harness import control_planes
from tests.harness import manifests as m
from tests.harness.cluster import running_cluster
from tests.harness.helm import CHART, Helm, helm_binary
from tests.harness.kubectl import KubectlEnv, user_of
from tests.harness.operator_world import SMALL
from tests.harness.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.process_runtime]

NS = install.NAME
RELEASE = install.NAME
CRDS = ("rayclusters.ray.io", "rayjobs.ray.io")
#: What the process runtime needs of the chart (deploy/overlays/dev does the same for
#: kustomize): the local `raycluster-operator` (it ignores images, this virtualenv's bin comes
#: first on PATH), and servers on the pod's IP, in case pods share the host's network.
IN_CLUSTER = {
    "operatorCommand": "raycluster-operator",
    "extraArgs": ["--health-addr=$(POD_IP):8082", "--metrics-addr=$(POD_IP):8080"],
    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
    "readinessProbe": {"initialDelaySeconds": 1, "periodSeconds": 1, "timeoutSeconds": 2},
}
# The Ray containers block before `ray start` and bring their own probes: no Ray is needed to
# see a slice reconciled (a user's probes are kept, docs/design.md, rule 3.4c).
BLOCK = ["sleep", "infinity"]
NO_RAY_PROBES = {
    "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
    "livenessProbe": {"exec": {"command": ["true"]}},
}


@dataclass
class Installing:
    cluster: DevCluster
    helm: Helm
    kubectl: KubectlEnv
    values: Path  # IN_CLUSTER as a values file

    async def json(self, *args: str) -> Any:
        _, out, _ = await self.kubectl.run(*args, "-o", "json")
        return json.loads(out)

    async def can(self, service_account: str, verb: str, what: str, *where: str) -> bool:
        """`kubectl auth can-i` as the ServiceAccount, answered by kube-apiserver's RBAC."""
        code, out, _ = await self.kubectl.run(
            "auth", "can-i", verb, what, *where, f"--as={service_account}", ok=False
        )
        assert out.strip() in ("yes", "no"), out
        return code == 0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kube(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Installing]:
    control_planes.require(control_planes.KUBERNETES)
    helm_binary()  # skip (or fail under CI) before starting a cluster
    home = tmp_path_factory.mktemp("helm-kube")
    values = home / "in-cluster.yaml"
    values.write_text(json.dumps(IN_CLUSTER))
    async with running_cluster(
        ["tpu:v5p:2x2x2:1", "cpu:2"], runtime="process", control_plane=control_planes.KUBERNETES
    ) as cluster:
        kubeconfig = cluster.write_kubeconfig(home / "kubeconfig")
        yield Installing(cluster, Helm(home, kubeconfig), KubectlEnv(kubeconfig, home), values)


def slice_cluster(name: str) -> dict[str, Any]:
    """One v5p 2x2x2 slice (2 hosts, 4 chips each) and a head."""
    tpu = {**SMALL, "google.com/tpu": "4"}
    worker = m.template(
        m.container("ray-worker", command=BLOCK, limits=tpu, **NO_RAY_PROBES),
        nodeSelector=dict(m.V5P_2X2X2),
    )
    head = m.head_group(m.container("ray-head", command=BLOCK, limits=SMALL, **NO_RAY_PROBES))
    group = m.worker_group("tpu", worker, replicas=1, min_replicas=0, max_replicas=1, hosts=2)
    return m.raycluster(name, head, [group])


async def test_install_reconcile_upgrade_uninstall(kube: Installing) -> None:
    helm, kubectl = kube.helm, kube.kubectl
    await helm.run(
        "install", RELEASE, str(CHART), "-n", NS, "--create-namespace", "-f", str(kube.values),
        "--wait", "--timeout=3m",
    )  # fmt: skip
    for crd in CRDS:
        await kubectl.run("get", "crd", crd)
    await kubectl.run("rollout", "status", f"deploy/{RELEASE}", "-n", NS, "--timeout=120s")
    before = await kube.json("get", "deploy", RELEASE, "-n", NS)
    assert before["status"]["readyReplicas"] == 2
    first = await leader_among_pods(kube)

    # The operator in its pods, as the chart's ServiceAccount, serves a RayCluster.
    await kubectl.run("apply", "-f", "-", stdin=json.dumps(slice_cluster("helm-slice")))

    async def slice_ready() -> None:
        got = await kube.json("get", "raycluster", "helm-slice")
        status = got.get("status") or {}
        assert status.get("readyWorkerSlices") == 1, status
        assert status.get("readyWorkerReplicas") == 2, status

    await eventually(slice_ready, 120, interval=0.5)
    await kubectl.run("delete", "raycluster", "helm-slice", "--wait=true")

    # An upgrade that changes a value of the pod template rolls the Deployment.
    await helm.run(
        "upgrade", RELEASE, str(CHART), "-n", NS, "--reuse-values",
        "--set", "resources.limits.memory=1Gi", "--wait", "--timeout=3m",
    )  # fmt: skip
    await kubectl.run("rollout", "status", f"deploy/{RELEASE}", "-n", NS, "--timeout=120s")
    after = await kube.json("get", "deploy", RELEASE, "-n", NS)
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    sets = (await kube.json("get", "rs", "-n", NS))["items"]
    assert len(sets) == 2, [s["metadata"]["name"] for s in sets]
    live = [s for s in sets if s["spec"]["replicas"]]
    assert len(live) == 1 and live[0]["status"].get("readyReplicas") == 2

    async def rolled() -> None:
        pods = (await kube.json("get", "pods", "-n", NS))["items"]
        pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        limits = [p["spec"]["containers"][0]["resources"]["limits"] for p in pods]
        assert limits == [{"memory": "1Gi"}] * 2, limits

    await eventually(rolled, 60, interval=0.5)
    # The old pods are gone, so a new one leads now.
    assert await leader_among_pods(kube) != first
    assert (await helm.run("history", RELEASE, "-n", NS)).stdout.count("\n") == 3

    # Uninstall: everything the chart made is gone, but Helm leaves CRDs (crds/) in place.
    await helm.run("uninstall", RELEASE, "-n", NS, "--wait", "--timeout=3m")
    await assert_only_crds_left(kube, NS, RELEASE)


async def leader_among_pods(kube: Installing) -> str:
    """The Lease's holder, once it is one of the Deployment's live pods."""

    async def held() -> str:
        lease = await kube.json("get", "lease", f"{RELEASE}-leader", "-n", NS)
        pods = (await kube.json("get", "pods", "-n", NS))["items"]
        live = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
        holder = str(lease["spec"].get("holderIdentity"))
        assert holder in live, (holder, live)
        return holder

    result: str = await eventually(held, 60, interval=0.5)
    return result


async def assert_only_crds_left(
    kube: Installing, namespace: str, release: str, crds: tuple[str, ...] = CRDS
) -> None:
    kinds = "deploy,rs,svc,sa,role,rolebinding,pdb,configmap,secret,lease"
    # What Kubernetes itself puts in every namespace, and the Lease the operator made at run
    # time (released on SIGTERM, not deleted: Helm never owned it).
    kept = {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}

    def leader_lease(kind: str, name: str) -> bool:
        # The chart's full name: the release's, plus the chart's unless the release has it.
        return kind == "Lease" and name.startswith(release) and name.endswith("-leader")

    async def gone() -> None:
        left = (await kube.json("get", kinds, "-n", namespace))["items"]
        names = {(o["kind"], o["metadata"]["name"]) for o in left}
        assert {n for n in names if not leader_lease(*n)} <= kept, names
        assert not (await kube.json("get", "pods", "-n", namespace))["items"]

    await eventually(gone, 60, interval=0.5)
    ours = f"app.kubernetes.io/instance={release}"
    for kind in ("clusterrole", "clusterrolebinding"):
        assert not (await kube.json("get", kind, "-l", ours))["items"]
    await kube.kubectl.run("get", "crd", *crds)  # fails unless each is there
    listed = json.loads((await kube.helm.run("list", "-A", "-o", "json")).stdout)
    assert release not in {r["name"] for r in listed}


async def test_cluster_wide_and_watch_namespace_rbac_by_kubectl_auth_can_i(
    kube: Installing, tmp_path: Path
) -> None:
    wide, narrow = "rco-wide", "rco-narrow"
    # A watched namespace must exist before the install puts a Role in it (KubeRay's too).
    await kube.kubectl.run("create", "namespace", "team-a")
    for release, sets in ((wide, []), (narrow, ["--set", "watchNamespace={team-a}"])):
        await kube.kubectl.run("create", "namespace", release)
        await kube.helm.run(
            "install", release, str(CHART), "-n", release, "-f", str(kube.values),
            f"--set=fullnameOverride={release}",
            "--set=replicas=1", "--set=podDisruptionBudget.enabled=false", *sets,
        )  # fmt: skip
    w, n = user_of(wide, wide), user_of(narrow, narrow)

    for who in (w, n):  # both run RayClusters in team-a, with leader election at home
        assert await kube.can(who, "create", "pods", "-n", "team-a")
        assert await kube.can(who, "patch", "rayclusters.ray.io/status", "-n", "team-a")
        assert not await kube.can(who, "update", "rayclusters.ray.io", "-n", "team-a")
        assert await kube.can(who, "list", "nodes")  # host-loss failover
    assert await kube.can(w, "create", "leases.coordination.k8s.io", "-n", wide)
    assert await kube.can(n, "create", "leases.coordination.k8s.io", "-n", narrow)

    # Cluster-wide: every namespace, and the installed CRD (to compare status after pruning).
    assert await kube.can(w, "create", "pods", "-n", "default")
    assert await kube.can(w, "list", "rayclusters.ray.io", "--all-namespaces")
    assert await kube.can(w, "get", "customresourcedefinitions/rayclusters.ray.io")
    # watchNamespace: team-a only, and cluster-wide nothing but reading Nodes.
    assert not await kube.can(n, "create", "pods", "-n", "default")
    assert not await kube.can(n, "list", "rayclusters.ray.io", "--all-namespaces")
    assert not await kube.can(n, "get", "customresourcedefinitions/rayclusters.ray.io")
    assert not await kube.can(n, "create", "leases.coordination.k8s.io", "-n", "team-a")

    for release in (wide, narrow):
        await kube.helm.run("uninstall", release, "-n", release, "--wait")
        await assert_only_crds_left(kube, release, release)
    assert not await kube.can(n, "create", "pods", "-n", "team-a")


async def test_beside_another_owner_of_the_crds_install_with_skip_crds(kube: Installing) -> None:
    """Helm 4 server-side applies crds/ even where the CRD exists (Helm 3 skipped it): over a
    CRD another manager owns (KubeRay's chart, kubectl) the install is refused with a conflict,
    and `--skip-crds` installs beside it, leaving that CRD as it is."""
    theirs = crd_manifest()
    theirs["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "KubeRay's"
    await kube.kubectl.run(
        "apply", "--server-side", "--force-conflicts", "--field-manager=kuberay-operator",
        "-f", "-", stdin=json.dumps(theirs),
    )  # fmt: skip
    install_ = ["install", "beside", str(CHART), "-n", "beside", "--create-namespace"]
    refused = await kube.helm.run(*install_, "-f", str(kube.values), ok=False)
    assert refused.returncode != 0
    assert 'conflict with "kuberay-operator"' in refused.stderr, refused.stderr
    await kube.helm.run(*install_, "-f", str(kube.values), "--skip-crds")
    description = "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}"
    _, kept, _ = await kube.kubectl.run("get", "crd", "rayclusters.ray.io", "-o", description)
    assert kept == "KubeRay's"
    await kube.helm.run("uninstall", "beside", "-n", "beside", "--wait")
    # With --skip-crds the chart brought none: the other owner's is what must be left.
    await assert_only_crds_left(kube, "beside", "beside", crds=("rayclusters.ray.io",))
