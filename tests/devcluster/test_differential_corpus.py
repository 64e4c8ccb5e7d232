"""The dev cluster measured against Kubernetes, request by request (issue #30, item 5).

Every request of tests/harness/differential/corpus/ is replayed on the embedded control plane
and on Kubernetes' own; a request that agreed when the baseline was recorded
(tests/harness/differential/baseline.txt) must still agree. A fix that makes more requests
agree records them with `python -m tests.harness.differential --write --baseline`.
"""

from __future__ import annotations

from tests.harness import control_planes
from tests.harness.differential import corpus, report, run


async def test_no_request_that_agreed_with_kubernetes_disagrees_now() -> None:
    control_planes.require(control_planes.KUBERNETES)
    areas = corpus.load()
    embedded, kubernetes = await run.both(areas)
    found = report.verdicts(areas, embedded, kubernetes)
    baseline = report.read_baseline()
    assert len(found) >= 200
    assert baseline <= {v.step for v in found}, "baseline names requests the corpus lacks"
    regressed = [v for v in found if v.step in baseline and not v.agrees]
    assert not regressed, "\n".join(f"{v.step}: " + "; ".join(v.differences[:3]) for v in regressed)
