"""The executor's record of the API refusing a pod of a slice (§4 rule 13c, §7).

The planner settles a pass's creates (`planning.features.quota.settle_creates`): a refused slice's
created pods are deleted in the same pass, and its group is held for the wait `hold_after`
gives, doubling per refusal in a row. This module only remembers: per cluster and group, the
current hold and the refusals in a row that led to it. The reconciler hands the holds to the
planner (`ClusterState.objects["AdmissionHold"]`), which shows the slices as waiting and asks
to be looked at again when a hold ends.

Holds live in memory: a restarted operator tries each held group once more, which costs one
refused create (and the undoing of the hosts admitted before it), then holds it again from
one strike; never a loop. A quota race clears by itself and a refusal as built with the
template, both visible to the next pass, unlike the crash-loop backoff's records (13a).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from raycluster_operator.planning.features.quota import AdmissionHold, Refusal, hold_after


@dataclass
class _Record:
    hold: AdmissionHold
    strikes: int


class RefusalHolds:
    def __init__(self) -> None:
        self._holds: dict[str, dict[str, _Record]] = {}

    def active(self, key: str, now: datetime) -> Mapping[str, AdmissionHold]:
        return {g: r.hold for g, r in self._holds.get(key, {}).items() if r.hold.until > now}

    def refuse(self, key: str, refusal: Refusal, now: datetime) -> AdmissionHold:
        """Record a refusal of the group's slice; answers the hold the planner gives it."""
        groups = self._holds.setdefault(key, {})
        held = groups.get(refusal.group)
        strikes = held.strikes + 1 if held else 1
        hold = hold_after(refusal.message, refusal.template, strikes, now)
        groups[refusal.group] = _Record(hold, strikes)
        return hold

    def created(self, key: str, groups: Sequence[str]) -> None:
        """A slice of each group went in whole: its refusals in a row are forgotten."""
        held = self._holds.get(key)
        if held is None:
            return
        for group in groups:
            held.pop(group, None)
        if not held:
            del self._holds[key]

    def forget(self, key: str) -> None:
        self._holds.pop(key, None)
