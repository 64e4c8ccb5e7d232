"""The hostile corpus in shared-cluster namespaces: a namespace per Pod Security level
(privileged, baseline with restricted warnings, restricted), one with a LimitRange and one
with a tight ResourceQuota, each given valid corpus clusters plus a multi-host one. What must
hold: the operator stays healthy; at privileged and baseline everything runs (nothing the
operator adds is below baseline); at restricted nothing runs and the refusal is named
(`PodRejected` with kube's PodSecurity words, `WriteRejected` for the head); under the
LimitRange every pod carries its defaults; under the quota no multi-host slice is ever seen
partial, and a cluster that does not fit says so (docs/design.md §4 rule 13c)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from raycluster_operator.kube import EVENTS, PODS, RAYCLUSTERS
from tests.harness.hardening_world import World, cpu_group, eventually, raycluster, world

CORPUS = Path(__file__).parent / "corpus"
FILES = [
    "template-other-namespace.yaml",
    "workers-to-delete-hostile.yaml",
    "unicode-values.yaml",
    "labels-override-ray-io.yaml",
]
PSA = "pod-security.kubernetes.io/"
NAMESPACES: dict[str, dict[str, str]] = {
    "psa-privileged": {f"{PSA}enforce": "privileged"},
    "psa-baseline": {f"{PSA}enforce": "baseline", f"{PSA}warn": "restricted"},
    "psa-restricted": {f"{PSA}enforce": "restricted"},
    "limits": {},
    "quota": {},
}
LIMITS = {
    "apiVersion": "v1",
    "kind": "LimitRange",
    "metadata": {"name": "defaults"},
    "spec": {
        "limits": [
            {"type": "Container", "default": {"cpu": "50m", "memory": "64Mi"}, "max": {"cpu": "1"}}
        ]
    },
}
QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "tight"},
    "spec": {"hard": {"count/pods": "6"}},
}


def clusters() -> list[tuple[dict[str, Any], int]]:
    """(object, pods it runs when nothing refuses it)."""
    out = []
    for name in FILES:
        text = (CORPUS / name).read_text()
        pods = int(text.split("pods=", 1)[1].split()[0])
        out.append((yaml.safe_load(text), pods))
    multi = raycluster("multi", [cpu_group("slices", 2, hosts=2)])
    out.append((multi, 5))
    return out


async def setup(w: World, ns: str, labels: dict[str, str]) -> None:
    await w.cluster.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
    )
    if ns == "limits":
        await w.cluster.apply({**LIMITS, "metadata": {"name": "defaults", "namespace": ns}})
    if ns == "quota":
        await w.cluster.apply({**QUOTA, "metadata": {"name": "tight", "namespace": ns}})

        async def synced() -> None:
            got = await w.cluster.client.get(f"/api/v1/namespaces/{ns}/resourcequotas/tight")
            assert (got.get("status") or {}).get("hard")

        await eventually(synced)


async def live_pods(w: World, ns: str, name: str) -> list[dict[str, Any]]:
    pods = await w.pods(name, ns)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def quota_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "SliceQuotaExceeded"), None)


async def settled(w: World, ns: str, obj: dict[str, Any], pods: int) -> None:
    name = obj["metadata"]["name"]
    running = await live_pods(w, ns, name)
    got = await w.kube.get(RAYCLUSTERS, ns, name)
    cond = quota_condition(got)
    if ns in ("psa-privileged", "psa-baseline", "limits"):
        assert len(running) == pods, (ns, name, len(running))
        if ns == "limits":  # every container limited: its own limits or the defaults
            for pod in running:
                for c in pod["spec"]["containers"]:
                    limits = (c.get("resources") or {}).get("limits") or {}
                    assert {"cpu", "memory"} <= set(limits), (pod["metadata"]["name"], c)
            defaulted = [
                p for p in running if "kubernetes.io/limit-ranger" in p["metadata"]["annotations"]
            ]
            assert defaulted or name == "multi", name  # the corpus files set no limits
    elif ns == "psa-restricted":
        assert running == [], (ns, name)
        refused = await refusals(w, ns, name)
        assert any('violates PodSecurity "restricted:latest"' in r for r in refused), refused
        assert cond is not None and cond["reason"] == "PodRejected", got.get("status")
        assert 'violates PodSecurity "restricted:latest"' in cond["message"]
    else:  # quota: complete, or saying why not
        if len(running) != pods:
            refused = await refusals(w, ns, name)
            said = cond is not None and cond["status"] == "True"
            assert said or any("exceeded quota" in r for r in refused), (name, refused)


async def refusals(w: World, ns: str, name: str) -> list[str]:
    events = (await w.kube.list(EVENTS, ns)).items
    return [
        str(e.get("note") or e.get("message") or "")
        for e in events
        if (e.get("regarding") or {}).get("name") == name
    ]


async def no_partial_slices(w: World, ns: str, seen: list[str]) -> None:
    """Sample the quota namespace: a multi-host slice is never seen with some hosts only
    once its pass is over (the executor deletes a refused slice's pods in the same pass)."""
    streak: dict[str, int] = {}
    while True:
        pods = (await w.kube.list(PODS, ns, label_selector="ray.io/replica-host-index")).items
        hosts: dict[str, int] = {}
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                name = pod["metadata"]["labels"]["ray.io/worker-group-replica-name"]
                hosts[name] = hosts.get(name, 0) + 1
        for name, n in hosts.items():
            streak[name] = streak.get(name, 0) + 1 if n < 2 else 0
            if streak[name] > 20:  # partial across many samples, not one pass
                seen.append(name)
        await asyncio.sleep(0.05)


async def test_corpus_in_namespaces_with_quotas_limit_ranges_and_each_pod_security_level() -> None:
    async with world(["cpu:8"]) as w:
        op = await w.start_operator(resync_period=1.0)
        for ns, labels in NAMESPACES.items():
            await setup(w, ns, labels)
        partial: list[str] = []
        sampler = asyncio.create_task(no_partial_slices(w, "quota", partial))
        try:
            applied = []
            for ns in NAMESPACES:
                for obj, pods in clusters():
                    obj["metadata"]["namespace"] = ns
                    created = await w.kube.create(RAYCLUSTERS, obj, namespace=ns)
                    w.checker.note_write(created)
                    applied.append((ns, created, pods))
            for ns, obj, pods in applied:
                await eventually(lambda n=ns, o=obj, p=pods: settled(w, n, o, p), within=60)  # type: ignore[misc]
            quota_pods = (await w.kube.list(PODS, "quota")).items
            assert len(quota_pods) <= 6
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
        assert partial == [], partial
        assert not op.task.done()
        assert w.checker.violations == []
