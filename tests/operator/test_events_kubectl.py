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
