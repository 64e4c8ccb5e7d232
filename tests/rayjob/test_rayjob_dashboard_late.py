"""The RayJob's Jobs API before the head's dashboard answers (issue 38 item 1): a head is
Ready (its probes pass) a moment before Ray's dashboard listens, so the operator's first
questions about the job meet a refused connection. That is the dashboard starting, not a
failure: the RayJob runs to Complete with 0 errors counted
(``raycluster_operator_rayjob_jobs_api_errors_total``) and nothing logged above debug.
On the simulated runtime, the stand-in Jobs API is stopped until the RayJob is Running and
the operator has met the refusal, then started on its port again."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from rayjob_world import NODES, RayJobWorld, rayjob

from tests.harness.waiting import eventually
from tests.harness.world import open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

LOGGER = "raycluster_operator.controller.rayjob.reconciler"
ERRORS = "raycluster_operator_rayjob_jobs_api_errors_total"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world() -> AsyncIterator[RayJobWorld]:
    async with open_world(RayJobWorld, NODES) as w:
        yield w


async def test_a_dashboard_that_answers_late_costs_no_jobs_api_error(
    world: RayJobWorld, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    registry = world.operators[-1].manager.metrics.registry
    port = int(world.jobs_api.url.rsplit(":", 1)[1])
    await world.jobs_api.stop()  # the dashboard is not listening yet
    ns = await world.namespace("late")
    await world.apply(tmp_path, rayjob("pi", ns))
    running = await world.until(ns, "pi", "Running")

    def starting() -> None:
        assert any("not answering yet" in r.getMessage() for r in caplog.records)

    await eventually(starting, 30)  # the operator asked while the dashboard was down
    await world.jobs_api.start(port)
    world.jobs_api.start_job(running["jobId"])
    world.jobs_api.finish(running["jobId"], "SUCCEEDED")
    await world.submitter_ran(ns, "pi")
    final = await world.until(ns, "pi", "Complete")
    assert final["jobStatus"] == "SUCCEEDED"
    assert registry.get_sample_value(ERRORS) == 0
    loud = [r for r in caplog.records if r.name == LOGGER and r.levelno > logging.DEBUG]
    assert not [r.getMessage() for r in loud if "jobs api" in r.getMessage()]
