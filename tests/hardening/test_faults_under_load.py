"""The lifecycle under injected API faults: the same invariants, convergence every step.

About 5% of the operator's writes fail (500, 429 with Retry-After, 409), every request gets
latency, watch streams are cut every 2 s and the watch history is expired once (410 on
resume). The same lifecycle first runs without faults, so the slowdown is measured in the
same run.
"""

from __future__ import annotations

from scenario import NODES, lifecycle

from tests.harness.hardening_world import world

#: (verb, resource, code, retry_after): the writes the operator makes.
WRITE_FAULTS = [
    ("create", "pods", 500, None),
    ("create", "pods", 429, 1),
    ("create", "pods", 409, None),
    ("delete", "pods", 500, None),
    ("delete", "pods", 429, 1),
    ("delete", "pods", 409, None),
    ("patch", "rayclusters/status", 500, None),
    ("patch", "rayclusters/status", 409, None),
    ("patch", "rayclusters/status", 429, 1),
    ("create", "events", 500, None),
    ("create", "services", 500, None),
]


async def test_the_lifecycle_holds_its_invariants_under_api_faults() -> None:
    async with world(NODES) as w:
        await w.start_operator()
        calm = await lifecycle(w, "calm")

        faults = w.cluster.faults
        for verb, resource, code, retry_after in WRITE_FAULTS:
            faults.fail(verb, resource, rate=0.05 / 3, code=code, retry_after=retry_after)
        faults.slow("create", "pods", seconds=0.01)
        faults.latency = 0.003
        faults.drop_watches_every = 2.0

        async def expire_once(step: str) -> None:
            if step == "host-failure":
                faults.expire_watch_history()
                faults.drop_watches()

        stormy = await lifecycle(w, "stormy", hook=expire_once, within=90)
        faults.clear()

        assert w.checker.snapshots > 50 and w.checker.events > 20
        assert w.checker.violations == []
        assert w.checker.spec_violations() == []
        assert await w.orphans() == []
        ratio = stormy.total / calm.total
        # Measured 1.1-1.9x alone; under `make test`'s 4 workers on 2 cores one step reached
        # 33x once (a node failure waiting on a starved node lifecycle loop), so the ratio is
        # printed, and only a hang (the storm never converging) fails here.
        assert stormy.total < 20 * calm.total + 60.0
        print(
            f"\nfault-free {calm.total:.1f}s, with faults {stormy.total:.1f}s (x{ratio:.1f}); "
            f"steps calm {_fmt(calm.steps)}; stormy {_fmt(stormy.steps)}; "
            f"{w.checker.snapshots} snapshots, {w.checker.events} cluster events checked"
        )


def _fmt(steps: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.1f}" for k, v in steps.items())
