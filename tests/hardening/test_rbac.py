"""Least privilege, derived from what the operator really does.

The operator runs a full scenario (the lifecycle with failures and workersToDelete, an
autoscaling cluster in another namespace, an invalid cluster, leader election in its own
namespace), as its ServiceAccount with deploy/'s RBAC enforced by the dev cluster, through a
client that records every request as (API group, resource, verb,
namespace). The shipped RBAC in deploy/ must grant exactly those, plus what the autoscaler's
Role grants (Kubernetes only lets a subject create a Role holding permissions it holds
itself) and nothing else. Every write lands in the RayCluster's namespace or the Lease's.
TLS is verified unless the insecure flag is given, and the bearer token never reaches a log.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from scenario import NODES, lifecycle

from devkube import addons_for
from raycluster_operator.api.models import load_cluster
from raycluster_operator.builders import build_autoscaler_rbac
from raycluster_operator.controller.manager import Manager
from raycluster_operator.kube import Kind, KubeClient, KubeError
from raycluster_operator.planning.features.backoff import ANNOTATION as BACKOFF_ANNOTATION
from tests.harness import manifests as m
from tests.harness.hardening_world import World, cpu_group, eventually, raycluster, world

DEPLOY = Path(__file__).parents[2] / "deploy"
OPERATOR_NS = "raycluster-operator"
Triple = tuple[str, str, str]  # (API group, resource[/subresource], verb)
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$"
)


#: `/api`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`: no resource, no grant.
_DISCOVERY = re.compile(r"^(/api(/[^/?]+)?|/apis(/[^/?]+){0,2})/?(\?.*)?$")


class RecordingClient(KubeClient):
    """The operator's client, noting every request it sends."""

    requests: list[tuple[str, str, str, str | None]]
    #: Bodies of patches to a RayCluster itself (not its status).
    cluster_patches: list[Any]

    def note(self, verb: str, path: str) -> None:
        if _DISCOVERY.match(path):
            return  # discovery (is a group served?) is every user's (system:discovery)
        match = _PATH.match(path)
        assert match, path
        resource = match["resource"]
        if match["sub"]:
            resource += "/" + match["sub"]
        self.requests.append((match["group"] or "", resource, verb, match["ns"]))

    async def _request(self, verb: str, method: str, path: str, **kwargs: Any) -> Any:
        self.note(verb, path)
        if verb == "patch" and self.requests[-1][1] == "rayclusters":
            self.cluster_patches.append(kwargs.get("body"))
        return await super()._request(verb, method, path, **kwargs)

    async def watch(
        self, kind: Kind, namespace: str | None = None, **kwargs: Any
    ) -> AsyncIterator[tuple[str, Any]]:  # type: ignore[override]
        self.note("watch", kind.collection_path(namespace))
        async for item in super().watch(kind, namespace, **kwargs):
            yield item


def recording_client(w: World) -> RecordingClient:
    client = RecordingClient.from_kubeconfig(w.operator_config)
    assert isinstance(client, RecordingClient)
    client.requests = []
    client.cluster_patches = []
    return client


def triples(rules: list[dict[str, Any]]) -> set[Triple]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def shipped_rbac() -> tuple[set[Triple], set[Triple]]:
    """(cluster-wide grants, lease-namespace grants) of deploy/base/rbac.yaml."""
    docs = list(yaml.safe_load_all((DEPLOY / "base" / "rbac.yaml").read_text()))
    cluster_rules = [d for d in docs if d and d["kind"] == "ClusterRole"]
    roles = [d for d in docs if d and d["kind"] == "Role"]
    assert len(cluster_rules) == 1 and len(roles) == 1
    return triples(cluster_rules[0]["rules"]), triples(roles[0]["rules"])


def autoscaler_grants() -> set[Triple]:
    obj = raycluster("probe", [cpu_group("w", 1)])
    obj["spec"]["enableInTreeAutoscaling"] = True
    obj["metadata"]["uid"] = "0"
    rbac = build_autoscaler_rbac(load_cluster(obj))
    return triples([r for o in rbac if o["kind"] == "Role" for r in o["rules"]])


@pytest.fixture
def debug_logs() -> Any:
    """Every log record of every logger at DEBUG while the test runs."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    handler, level = Keep(logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


async def gb200_domain_lifecycle(w: World) -> None:
    """A GB200 slice with its ComputeDomain (rule 13b), then scaled to 0: the domain's grants
    (list, watch, create, delete) are used."""
    gpus = {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": "4"}
    pod = m.template(
        m.container("ray-worker", requests=gpus, limits=gpus),
        nodeSelector={"nvidia.com/gpu.product": "NVIDIA-GB200"},
    )
    group = m.worker_group("nvl", pod, replicas=1, min_replicas=0, max_replicas=1, hosts=2)
    await w.create(raycluster("gb", [group], ns="team-a"))
    domains = "/apis/resource.nvidia.com/v1beta1/namespaces/team-a/computedomains"

    async def domain_ready() -> None:
        items = (await w.cluster.client.list(domains))["items"]
        assert [d.get("status", {}).get("status") for d in items] == ["Ready"]

    await eventually(domain_ready, within=60)
    await w.set_group("gb", "nvl", ns="team-a", replicas=0)

    async def domain_gone() -> None:
        assert (await w.cluster.client.list(domains))["items"] == []

    await eventually(domain_gone, within=60)


async def test_the_shipped_rbac_grants_exactly_what_a_full_run_uses(debug_logs: Any) -> None:
    gb200 = ["gpu:gb200:2:1"]
    async with world([*NODES, *gb200], addons=addons_for(gb200)) as w:
        client = recording_client(w)
        from tests.harness.hardening_world import fast_options

        # The Lease in the operator's own namespace, the only one deploy/ grants leases in.
        options = fast_options(
            leader_elect=True, lease_namespace=OPERATOR_NS, lease_name="rco", identity="rbac"
        )
        manager = Manager(client, options)
        task = asyncio.create_task(manager.run())
        try:
            await eventually(lambda: _assert(manager.is_leader), within=20)
            scaled = raycluster("autoscaled", [cpu_group("w", 1)], ns="team-a")
            scaled["spec"]["enableInTreeAutoscaling"] = True
            await w.create(scaled)
            broken = raycluster("broken", [cpu_group("w", 1)], ns="team-a")
            broken["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 0
            await w.create(broken)
            await lifecycle(w, "rbac")
            await gb200_domain_lifecycle(w)
            await rayjob_lifecycle(w)
            await eventually(lambda: w.converged("autoscaled", "team-a"))
            tokens = [w.cluster.token, w.operator_config["users"][0]["user"]["token"]]
        finally:
            manager.stop()
            await asyncio.wait_for(task, 15)
            await client.close()

    used = {(g, r, v) for g, r, v, _ in client.requests}
    cluster_grants, lease_grants = shipped_rbac()
    lease_used = {(g, r, v) for g, r, v, ns in client.requests if r == "leases"}
    assert {ns for _, r, _, ns in client.requests if r == "leases"} == {OPERATOR_NS}
    assert lease_used == lease_grants, "the lease Role grants exactly what leader election uses"
    used_elsewhere = used - lease_used
    # No less: everything used is granted.
    assert used_elsewhere <= cluster_grants, sorted(used_elsewhere - cluster_grants)
    # No more: every grant is used, or held only so the autoscaler's Role can be created.
    unused = cluster_grants - used_elsewhere - RAYSERVICE_RUN
    assert unused <= autoscaler_grants(), sorted(unused - autoscaler_grants())
    print(f"\nused: {sorted(used)}\nheld only for the autoscaler Role: {sorted(unused)}")

    # Writes land only in a RayCluster's namespace or the Lease's.
    writes = {
        (r, ns) for _, r, v, ns in client.requests if v in ("create", "update", "patch", "delete")
    }
    assert {ns for _, ns in writes} <= {"default", "team-a", OPERATOR_NS}
    assert {ns for r, ns in writes if r != "leases"} == {"default", "team-a"}
    # The RayCluster itself is written through status, and otherwise only in its metadata: the
    # crash-loop backoff's annotation (docs/design.md §3.6), never its spec.
    for body in client.cluster_patches:
        assert set(body) == {"metadata"}, body
        assert set(body["metadata"]) == {"annotations"}, body
        assert set(body["metadata"]["annotations"]) == {BACKOFF_ANNOTATION}, body
    assert len(client.cluster_patches) == sum(
        1 for w_ in client.requests if w_[1:3] == ("rayclusters", "patch")
    )

    # No secret in any log line, at debug level, of any library.
    assert len(debug_logs) > 100
    for record in debug_logs:
        text = record.getMessage()
        for token in tokens:
            assert token not in text, record.name
            assert token not in repr(record.args), record.name


def _assert(cond: bool) -> None:
    assert cond


def _rayjob(name: str, **spec: Any) -> dict[str, Any]:
    cluster = raycluster(name, [cpu_group("w", 1)], ns="team-a")
    body = {"entrypoint": "python -c 1", "rayClusterSpec": cluster["spec"], **spec}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": body,
    }


#: The RayService controller's own grants: watching RayServices, writing their status and
#: moving a serve Service's selector when traffic switches clusters, which needs Serve
#: applications RUNNING. tests/rayservice runs that lifecycle as the operator's ServiceAccount
#: with deploy/'s RBAC (against its Serve API stand-in); this run has no Serve.
RAYSERVICE_RUN = {
    ("", "services", "patch"),
    ("ray.io", "rayservices", "watch"),
    ("ray.io", "rayservices/status", "patch"),
}


async def rayjob_lifecycle(w: World) -> None:
    """The RayJob controller's grants in use: a RayJob creates its cluster and submitter Job,
    is suspended (both deleted, status written), and one that fails its deadline deletes itself
    (deletionStrategy DeleteSelf)."""
    jobs = Kind("ray.io", "v1", "RayJob", "rayjobs")
    await w.kube.create(jobs, _rayjob("rj"), "team-a")

    async def state(name: str, want: str) -> None:
        got = (await w.kube.get(jobs, "team-a", name)).get("status") or {}
        assert got.get("jobDeploymentStatus") == want, got

    await eventually(lambda: state("rj", "Running"), within=60)
    await w.kube.patch(jobs, "team-a", "rj", {"spec": {"suspend": True}})
    await eventually(lambda: state("rj", "Suspended"), within=60)
    strategy = {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {"policy": "DeleteSelf"}}
    await w.kube.create(
        jobs, _rayjob("late", activeDeadlineSeconds=1, deletionStrategy=strategy), "team-a"
    )

    async def deleted() -> None:
        names = [j["metadata"]["name"] for j in (await w.kube.list(jobs, "team-a")).items]
        assert "late" not in names, names

    await eventually(deleted, within=60)


async def test_tls_is_verified_unless_the_insecure_flag_is_given() -> None:
    async with world(["cpu:1"]) as w:
        config = w.cluster.kubeconfig_dict()
        wrong_ca = trustme.CA().cert_pem.bytes()
        config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
            wrong_ca
        ).decode()
        strict = KubeClient.from_kubeconfig(config)
        with pytest.raises(KubeError, match=r"(?i)certificate|ssl"):
            await strict.list(Kind("", "v1", "Namespace", "namespaces", namespaced=False))
        await strict.close()

        insecure = KubeClient.from_kubeconfig(config, insecure=True)
        listing = await insecure.list(Kind("", "v1", "Namespace", "namespaces", namespaced=False))
        assert "default" in {n["metadata"]["name"] for n in listing.items}
        await insecure.close()


async def test_the_run_command_refuses_a_server_it_cannot_verify(tmp_path: Path) -> None:
    """The CLI end to end: a kubeconfig with the wrong CA never gets a synced cache."""
    async with world(["cpu:1"]) as w:
        config = w.cluster.kubeconfig_dict()
        config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
            trustme.CA().cert_pem.bytes()
        ).decode()
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        process = await asyncio.create_subprocess_exec(
            # The console script beside the running interpreter (.venv's in `make test`).
            str(Path(sys.executable).with_name("raycluster-operator")),
            "run",
            f"--kubeconfig={path}",
            "--no-leader-elect",
            "--metrics-addr=",
            "--health-addr=",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        seen: list[bytes] = []
        try:
            # Until it says why it cannot connect (startup takes seconds on a loaded machine).
            assert process.stderr is not None
            while line := await asyncio.wait_for(process.stderr.readline(), 120):
                seen.append(line)
                if re.search(rb"(?i)certificate verify failed", line):
                    break
        finally:
            process.terminate()
            _, err = await asyncio.wait_for(process.communicate(), 15)
        text = b"".join(seen).decode() + err.decode()
        assert "caches synced" not in text
        assert re.search(r"(?i)certificate verify failed|CERTIFICATE_VERIFY_FAILED", text), text[
            -2000:
        ]
        assert w.cluster.token not in text
