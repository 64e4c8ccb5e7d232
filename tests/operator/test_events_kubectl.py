"""The operator's Events as a kubectl user reads them (issue 38 item 3): with
firstTimestamp, lastTimestamp, count and source, so the common
``kubectl get events --sort-by=.lastTimestamp`` lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
from parity_kubectl import Kubectl

from tests.harness.operator_world import SharedWorld, cpu_group, eventually, raycluster

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_events_sort_by_last_timestamp_with_counts_and_source(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    kubectl = Kubectl(shared_world.cluster, tmp_path)
    await kubectl.apply(raycluster("evts", [cpu_group("g", replicas=1)]))

    async def listed() -> str:
        out = await kubectl(
            "get",
            "events",
            "--sort-by=.lastTimestamp",
            "--field-selector",
            "involvedObject.kind=RayCluster,involvedObject.name=evts",
            "-o",
            "custom-columns=LAST:.lastTimestamp,FIRST:.firstTimestamp,COUNT:.count,"
            "SOURCE:.source.component,REASON:.reason",
            "--no-headers",
        )
        rows = [line.split() for line in out.splitlines() if line.strip()]
        assert rows, out
        return out

    out = await eventually(listed, within=30)
    rows = [line.split() for line in out.splitlines()]
    for last, first, count, source, _reason in rows:
        assert last != "<none>" and first != "<none>", out
        assert int(count) >= 1, out
        assert source != "<none>", out  # the operator instance's name
    assert [r[0] for r in rows] == sorted(r[0] for r in rows), out


async def test_wide_listing_shows_the_head_service_ip_and_a_lost_host_counts_its_pods(
    shared_world: SharedWorld, tmp_path: Path
) -> None:
    """`kubectl get rayclusters -o wide`'s HEAD SERVICE IP column is filled (the head service
    is headless, so it is the head pod's IP, as KubeRay writes it), and the README's
    `kubectl delete pod -l ray.io/replica-host-index=1` on a 2-host slice gives a HostTerminating
    Event that counts its pods like every other deletion Event."""
    kubectl = Kubectl(shared_world.cluster, tmp_path)
    await kubectl.apply(raycluster("wide", [cpu_group("g", replicas=1, hosts=2)]))

    async def listed() -> list[str]:
        out = await kubectl("get", "rayclusters", "wide", "-o", "wide")
        header, row = out.splitlines()
        columns = [c.strip() for c in header.split("  ") if c.strip()]
        cells = dict(zip(columns, row.split(), strict=False))
        head = [
            p
            for p in await kubectl.pods("wide")
            if p["metadata"]["labels"]["ray.io/node-type"] == "head"
        ]
        assert head and cells.get("HEAD SERVICE IP") == head[0]["status"]["podIP"], out
        return [header, row]

    await eventually(listed, within=30)
    await kubectl(
        "delete", "pod", "-l", "ray.io/cluster=wide,ray.io/replica-host-index=1", "--wait=false"
    )

    async def counted() -> str:
        out = await kubectl(
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=wide,reason=HostTerminating",
            "-o",
            "jsonpath={.items[*].message}",
        )
        assert "(1 pod)" in out, out
        return out

    await eventually(counted, within=30)
