"""What the executor does when the API refuses a pod of a slice (§4 rule 13c, §7).

A refusal mid-slice must not leave a partial slice behind, nor turn into create/delete churn:

- the slice's pods that were created in the same pass are deleted at once, in that pass;
- the group is held (no slice of it is created) for a while, doubling per refusal in a row
  (5 s to 300 s for quota, 30 s to 300 s for a pod refused as built), and released when a
  slice of the group is created whole. The hold is handed to the planner, which shows the
  slice as waiting (`SliceQuotaExceeded` / `PodRejected`) and asks to be looked at again
  when it ends.

Kinds of refusal, read from the 403's message as kube-apiserver words it: `exceeded quota`
(and `status unknown for quota`) is a quota race, retried when quota may have freed;
anything else (`violates PodSecurity`, a LimitRange's `maximum cpu usage per Container`,
`failed quota: q: must specify`, RBAC) means the pod cannot be admitted as built: a spec
problem, retried when the template changes. Holds live in memory: a restarted operator tries
once more, which costs one refusal, not a loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from raycluster_operator.planning.actions import PodCreate
from raycluster_operator.planning.quota import TEMPLATE_HASH, AdmissionHold
from raycluster_operator.planning.reasons import HoldReason

QUOTA_BASE, REJECTED_BASE, CAP = 5.0, 30.0, 300.0


def refusal_reason(message: str) -> HoldReason:
    if "exceeded quota" in message or "status unknown for quota" in message:
        return HoldReason.SLICE_QUOTA_EXCEEDED
    return HoldReason.POD_REJECTED


@dataclass
class _Record:
    hold: AdmissionHold
    strikes: int


class RefusalHolds:
    def __init__(self) -> None:
        self._holds: dict[str, dict[str, _Record]] = {}

    def active(self, key: str, now: datetime) -> Mapping[str, AdmissionHold]:
        return {g: r.hold for g, r in self._holds.get(key, {}).items() if r.hold.until > now}

    def refuse(self, key: str, create: PodCreate, message: str, now: datetime) -> AdmissionHold:
        reason = refusal_reason(message)
        groups = self._holds.setdefault(key, {})
        strikes = groups[create.group].strikes + 1 if create.group in groups else 1
        base = QUOTA_BASE if reason == HoldReason.SLICE_QUOTA_EXCEEDED else REJECTED_BASE
        wait = min(CAP, base * 2 ** (strikes - 1))
        meta = create.manifest.get("metadata") or {}
        template = str((meta.get("annotations") or {}).get(TEMPLATE_HASH) or "")
        hold = AdmissionHold(now + timedelta(seconds=wait), reason, message, template)
        groups[create.group] = _Record(hold, strikes)
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
