"""A slice is created whole or not at all (docs/design.md §4 rule 13c): new slices are checked
against the namespace's ResourceQuotas before any of their pods is created.

Pure: the quotas come from the operator's cache (None when it may not read them: then nothing
is checked here and the executor's refusal path protects alone), the holds from the executor's
record of admission refusals, `now` from the caller.

- Each new slice (every host of one replica; a single-host pod alone; the head alone) is
  charged what kube's quota admission charges its pods (`kubefacts.quota`): the pod as
  admission sees it, requests defaulted from limits (a TPU set only in `limits` is charged)
  and the namespace's LimitRange defaults applied, init containers as their largest, plus
  overhead; against each
  quota's `status.hard` and `status.used` plus what this plan already charged before it, in
  plan order. A slice that does not fit is not created: none of its pods is in the plan, its
  creation Event is replaced by one Warning Event `SliceQuotaExceeded` (recorded when the
  message changes, not each pass) naming the quota, the resource and how much is missing;
  `status.workerGroups[].quotaWaiting` lists its index, and the condition
  `SliceQuotaExceeded` is True. The head is one pod like any other: it waits the same way.
- A group under a hold (the API refused a pod of its slice: `exceeded quota` in a race, or
  the pod as built: PodSecurity, LimitRange, `must specify`) creates no slice until the hold
  ends; a refusal of the pod as built ends early when the group's template changes.
- A refusal that still comes mid-slice is settled here too (`settle_creates`, `hold_after`):
  the deletes that undo the slice in the same pass and the group's hold; the executor runs
  them and records the hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from kubefacts import quota as q
from kubefacts.timestamps import parse_time
from raycluster_operator.planning.actions import CREATE_POD, PlannedEvent, PodCreate, PodDelete
from raycluster_operator.planning.context import Cached
from raycluster_operator.planning.feature import Feature, Route, Watch
from raycluster_operator.planning.reasons import (
    Condition,
    ConditionReason,
    ConditionType,
    CreateReason,
    DeleteReason,
    HoldReason,
)
from raycluster_operator.planning.turn import QUOTA_WAITING, ClusterTurn

CONDITION = ConditionType.SLICE_QUOTA_EXCEEDED
#: `ClusterState.objects` keys: the namespace's ResourceQuotas (absent: not watched), and the
#: executor's holds after a refused pod.
QUOTA_KIND = "ResourceQuota"
#: The namespace's LimitRanges (absent: not watched, no defaults predicted).
LIMIT_RANGE_KIND = "LimitRange"
HOLD_KIND = "AdmissionHold"
TEMPLATE_HASH = "ray.io/pod-template-hash"
#: Holds after a refused pod (seconds): the first wait for a quota race and for a pod refused
#: as built, and the longest.
QUOTA_HOLD_BASE, REJECTED_HOLD_BASE, HOLD_CAP = 5.0, 30.0, 300.0
#: `PodCreate.group` of the head pod.
HEAD_GROUP = "headgroup"


@dataclass(frozen=True)
class AdmissionHold:
    """The API refused a pod of a slice of this group: create none of its slices until
    `until`, or (a refusal of the pod as built) until the template is no longer `template`."""

    until: datetime
    reason: HoldReason
    message: str
    template: str = ""


@dataclass(frozen=True)
class Waiting:
    group: str
    index: int | None
    hosts: int
    reason: HoldReason
    message: str
    #: The API's refusal of the slice's first pod, as KubeRay reports it: kube-apiserver's
    #: own for a refused create; for a slice not sent, the one it would give (the pod named
    #: by its generateName).
    refusal: str = ""


def unit_positions(creates: Sequence[PodCreate]) -> list[list[int]]:
    """The plan's creates by slice, as positions in plan order: a replica's hosts together,
    anything else alone. A unit is created whole or not at all: the planner fits units to
    the quotas, and `settle_creates` undoes a unit the API refused midway."""
    units: list[list[int]] = []
    where: dict[tuple[str, int | None, str], int] = {}
    for i, c in enumerate(creates):
        if c.replica_name is None:
            units.append([i])
            continue
        key = (c.group, c.replica_index, c.replica_name)
        if key not in where:
            where[key] = len(units)
            units.append([])
        units[where[key]].append(i)
    return units


def _units(creates: Sequence[PodCreate]) -> list[list[PodCreate]]:
    return [[creates[i] for i in unit] for unit in unit_positions(creates)]


def refusal_reason(message: str) -> HoldReason:
    """What a 403 for a pod create says, in kube-apiserver's words: `exceeded quota` (and
    `status unknown for quota`) is a quota race, retried when quota may have freed; anything
    else (`violates PodSecurity`, a LimitRange's maximum, `failed quota: q: must specify`,
    RBAC) means the pod cannot be admitted as built, a spec problem."""
    if "exceeded quota" in message or "status unknown for quota" in message:
        return HoldReason.SLICE_QUOTA_EXCEEDED
    if "error looking up service account" in message:
        # The ServiceAccount admission plugin, before the namespace's account exists.
        return HoldReason.SERVICE_ACCOUNT_PENDING
    return HoldReason.POD_REJECTED


#: Refusals that clear by themselves: retried after a short hold, never a failed pass.
RACES = (HoldReason.SLICE_QUOTA_EXCEEDED, HoldReason.SERVICE_ACCOUNT_PENDING)


def hold_after(message: str, template: str, strikes: int, now: datetime) -> AdmissionHold:
    """The hold on a group whose slice the API refused, the `strikes`-th refusal in a row:
    5 s doubling to 300 s for quota, 30 s doubling to 300 s for a pod refused as built (that
    one also ends when the group's template is no longer `template`). Doubling, so a refusal
    that lasts costs a few creates an hour, not a churn."""
    reason = refusal_reason(message)
    base = QUOTA_HOLD_BASE if reason in RACES else REJECTED_HOLD_BASE
    wait = min(HOLD_CAP, base * 2 ** (strikes - 1))
    return AdmissionHold(now + timedelta(seconds=wait), reason, message, template)


@dataclass(frozen=True)
class Refusal:
    """A group whose slice the API refused in this pass: the first refusal's message, the
    refused pod's template hash (a fix of the template ends a hold as built), and the
    deletes that undo every refused unit of the group."""

    group: str
    message: str
    template: str
    undo: tuple[PodDelete, ...]


@dataclass(frozen=True)
class Settled:
    """What a pass's pod creates leave to do (rule 13c): `whole` are the groups a slice of
    which went in whole and none was refused (their refusals in a row are over); `refused`
    one `Refusal` per group refused, whose hold the executor records and whose deletes it
    runs in the same pass."""

    whole: tuple[str, ...]
    refused: tuple[Refusal, ...]


def settle_creates(
    creates: Sequence[PodCreate],
    made: Sequence[Cached | None],
    refusals: Mapping[int, str],
) -> Settled:
    """The plan's handling of its creates' outcomes: `made[i]` is the pod the API returned
    for `creates[i]` (None if it failed), `refusals[i]` the message of its 403. A unit with
    a refused pod is undone whole: every pod of it that was made is deleted, by uid, so no
    partial slice outlives the pass. A unit with another failure is neither: the next pass
    sees what stands. One refusal per group and pass, so two slices refused at once count
    as one strike."""
    whole: list[str] = []
    refused: dict[str, Refusal] = {}
    for unit in unit_positions(creates):
        group = creates[unit[0]].group
        first = next((i for i in unit if i in refusals), None)
        if first is None:
            if all(made[i] is not None for i in unit):
                whole.append(group)
            continue
        undo = tuple(_undo(creates[i], pod, refusals[first]) for i in unit if (pod := made[i]))
        if group in refused:
            held = refused[group]
            refused[group] = Refusal(group, held.message, held.template, held.undo + undo)
            continue
        meta = creates[first].manifest.get("metadata") or {}
        template = str((meta.get("annotations") or {}).get(TEMPLATE_HASH) or "")
        refused[group] = Refusal(group, refusals[first], template, undo)
    kept = tuple(dict.fromkeys(g for g in whole if g not in refused))
    return Settled(kept, tuple(refused.values()))


def _undo(create: PodCreate, pod: Cached, message: str) -> PodDelete:
    meta = pod.get("metadata") or {}
    return PodDelete(
        str(meta.get("name")),
        create.group,
        create.replica_name,
        DeleteReason.REPLICA_INCOMPLETE,
        f"slice refused mid-creation: {message}",
        replica_index=create.replica_index,
        host_index=create.host_index,
        uid=meta.get("uid"),
    )


class _Ledger:
    """Each quota's hard and used figures, charged as slices are admitted into the plan."""

    def __init__(self, quotas: Sequence[Cached], limit_ranges: Sequence[Cached] = ()) -> None:
        self.quotas = sorted(quotas, key=lambda o: str((o.get("metadata") or {}).get("name")))
        self.limit_ranges = limit_ranges
        self.used: dict[str, q.Usage] = {}
        for quota in self.quotas:
            status = quota.get("status") or {}
            self.used[_name(quota)] = {
                k: q.amount(v) for k, v in (status.get("used") or {}).items()
            }

    def charge(self, unit: Sequence[PodCreate]) -> dict[str, q.Usage]:
        """Per quota, what the unit's pods cost under the names it holds."""
        out: dict[str, q.Usage] = {}
        admitted = [q.as_admitted(c.manifest, self.limit_ranges) for c in unit]
        for quota in self.quotas:
            hard = (quota.get("status") or {}).get("hard") or {}
            total: q.Usage = {}
            for pod in admitted:
                if q.quota_covers_pod(quota, pod):
                    usage = q.pod_usage(pod)
                    total = q.add(total, {k: v for k, v in usage.items() if k in hard})
            out[_name(quota)] = {k: v for k, v in total.items() if v[0] != 0}
        return out

    def shortfall(self, charges: Mapping[str, q.Usage]) -> tuple[str, str] | None:
        """Kube's `exceeded quota` sentence for the first quota the charge does not fit, and
        what is missing; None when it fits every quota."""
        zero: q.Amount = (Fraction(0), q.DECIMAL)
        for quota in self.quotas:
            name = _name(quota)
            status = quota.get("status") or {}
            hard = {k: q.amount(v) for k, v in (status.get("hard") or {}).items()}
            used = self.used[name]
            requested = charges.get(name) or {}
            over = sorted(
                k for k, v in requested.items() if used.get(k, zero)[0] + v[0] > hard[k][0]
            )
            if not over:
                continue
            was = {k: used.get(k, zero) for k in over}
            missing = {k: (was[k][0] + requested[k][0] - hard[k][0], requested[k][1]) for k in over}
            return (
                f"exceeded quota: {name}, requested: {q.pretty({k: requested[k] for k in over})}"
                f", used: {q.pretty(was)}, limited: {q.pretty({k: hard[k] for k in over})}",
                f"missing {q.pretty(missing)}",
            )
        return None

    def take(self, charges: Mapping[str, q.Usage]) -> None:
        for name, usage in charges.items():
            self.used[name] = q.add(self.used[name], usage)


def _name(obj: Cached) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _held(
    unit: Sequence[PodCreate], holds: Mapping[str, AdmissionHold], now: datetime
) -> AdmissionHold | None:
    hold = holds.get(unit[0].group)
    if hold is None or now >= hold.until:
        return None
    template = str(
        ((unit[0].manifest.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_HASH) or ""
    )
    if hold.reason == HoldReason.POD_REJECTED and hold.template and template != hold.template:
        return None  # the template changed: the fix deserves a try at once
    return hold


def fit_slices(
    creates: Sequence[PodCreate],
    quotas: Sequence[Cached] | None,
    holds: Mapping[str, AdmissionHold],
    now: datetime,
    limit_ranges: Sequence[Cached] = (),
) -> tuple[tuple[PodCreate, ...], list[Waiting]]:
    """The creates that go ahead, and the slices that wait (for quota, or out a hold)."""
    ledger = _Ledger(quotas or (), limit_ranges)
    kept: list[PodCreate] = []
    waiting: list[Waiting] = []
    for unit in _units(creates):
        hold = _held(unit, holds, now)
        group, index, hosts = unit[0].group, unit[0].replica_index, len(unit)
        if hold is not None:
            waiting.append(Waiting(group, index, hosts, hold.reason, hold.message, hold.message))
            continue
        charges = ledger.charge(unit) if quotas is not None else {}
        short = None if quotas is None else ledger.shortfall(charges)
        if short is not None:
            kube, missing = short
            refusal = f'pods "{_pod_name(unit[0])}" is forbidden: {kube}'
            waiting.append(
                Waiting(
                    group,
                    index,
                    hosts,
                    HoldReason.SLICE_QUOTA_EXCEEDED,
                    f"{kube}; {missing}",
                    refusal,
                )
            )
            continue
        ledger.take(charges)
        kept += unit
    return tuple(kept), waiting


def _pod_name(create: PodCreate) -> str:
    meta = create.manifest.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")


def kuberay_replica_failure(first: Waiting) -> Condition:
    """KubeRay's `ReplicaFailure` for the first slice that waits (the head first, as KubeRay
    creates it first): reason `FailedCreateHeadPod` or `FailedCreateWorkerPod`, message the
    reason and the API's refusal joined by a newline, as KubeRay's `errors.Join` prints them
    (docs/design.md §6)."""
    reason = (
        ConditionReason.FAILED_CREATE_HEAD_POD
        if first.group == HEAD_GROUP
        else ConditionReason.FAILED_CREATE_WORKER_POD
    )
    return Condition(
        ConditionType.KUBERAY_REPLICA_FAILURE, True, reason, f"{reason}\n{first.refusal}"
    )


def sentence(w: Waiting) -> str:
    where = f"slice at index {w.index}" if w.index is not None else "a pod"
    size = f" ({w.hosts} hosts)" if w.hosts > 1 else ""
    return f"group {w.group}: {where}{size} waits, not created: {w.message}"


def without_create_events(
    events: Sequence[PlannedEvent], waiting: Sequence[Waiting]
) -> list[PlannedEvent]:
    """The plan's Events less the creation Events of slices that wait."""
    held = {(w.group, w.index) for w in waiting}
    head = any(w.group == HEAD_GROUP for w in waiting)
    out = []
    for e in events:
        if head and e.reason == CreateReason.HEAD_MISSING:
            continue
        if e.action == CREATE_POD and any(
            e.message.startswith(f"group {g}: creating ")
            and (i is None or f" at index {i} " in e.message + " ")
            for g, i in held
        ):
            continue
        out.append(e)
    return out


def read_holds(objects: Sequence[Cached]) -> dict[str, AdmissionHold]:
    """The executor's holds, handed over as `ClusterState.objects["AdmissionHold"]`."""
    out = {}
    for o in objects:
        out[str(o["group"])] = AdmissionHold(
            parse_time(str(o["until"])),
            HoldReason(str(o["reason"])),
            str(o.get("message") or ""),
            str(o.get("template") or ""),
        )
    return out


def hold_object(group: str, hold: AdmissionHold) -> dict[str, Any]:
    return {
        "group": group,
        "until": hold.until.isoformat(),
        "reason": hold.reason.value,
        "message": hold.message,
        "template": hold.template,
    }


class Quota(Feature):
    """Rule 13c as a lifecycle feature: at `finish`, when every group and the head are
    planned, the pass's new slices are fitted to the quotas in plan order."""

    rule = "13c"
    #: By namespace; without the grant the operator runs without the check.
    watches = (
        Watch("", "v1", "ResourceQuota", "resourcequotas", route=Route.NAMESPACE),
        Watch("", "v1", "LimitRange", "limitranges", route=Route.NAMESPACE),
    )

    def __init__(self, turn: ClusterTurn) -> None:
        objects = turn.context.state.objects
        self.quotas = objects.get(QUOTA_KIND)
        self.limit_ranges = objects.get(LIMIT_RANGE_KIND) or ()
        self.holds = read_holds(objects.get(HOLD_KIND) or ())
        self.now = turn.context.now
        self.previous = turn.previous_condition(CONDITION)
        self.waiting: dict[str, list[int]] = {}
        self.said: Condition | None = None
        #: KubeRay's ReplicaFailure, beside ours while a slice waits; absent otherwise.
        self.kuberay: Condition | None = None

    def finish(self, turn: ClusterTurn) -> None:
        if not self.quotas and not self.holds and self.previous is None:
            return  # nothing to fit to, nothing held, nothing to clear
        creates, waiting = fit_slices(
            turn.creates, self.quotas, self.holds, self.now, self.limit_ranges
        )
        turn.creates[:] = creates
        due = soonest_hold(self.holds, self.now)
        if due is not None:
            turn.requeue.append(due)
        by_group: dict[str, list[int]] = {}
        for w in waiting:
            if w.index is not None:
                by_group.setdefault(w.group, []).append(w.index)
        self.waiting = by_group
        if not waiting:
            if self.previous is not None:
                self.said = Condition(CONDITION, False, ConditionReason.QUOTA_AVAILABLE)
            return
        turn.events[:] = without_create_events(turn.events, waiting)
        message = "; ".join(sentence(w) for w in waiting)
        reason = (
            ConditionReason.POD_REJECTED
            if waiting[0].reason == HoldReason.POD_REJECTED
            else ConditionReason.SLICE_QUOTA_EXCEEDED
        )
        self.said = Condition(CONDITION, True, reason, message)
        self.kuberay = kuberay_replica_failure(waiting[0])
        previous = self.previous or {}
        if previous.get("status") != "True" or previous.get("message") != message:
            # Recorded when the wait begins or changes, never at steady state.
            turn.events += [PlannedEvent("Warning", w.reason, sentence(w)) for w in waiting]

    def conditions(self) -> Sequence[Condition]:
        return tuple(c for c in (self.said, self.kuberay) if c is not None)

    fields = {
        QUOTA_WAITING: {
            "description": "Indices of slices not created because they do not fit the "
            "namespace's ResourceQuotas, or because the API refused a pod of the group's "
            "slices (condition SliceQuotaExceeded says why).",
            "type": "array",
            "items": {"description": "Replica index.", "type": "integer", "format": "int32"},
        }
    }

    def status(self, group: str) -> Mapping[str, Any]:
        waiting = self.waiting.get(group)
        return {QUOTA_WAITING: sorted(waiting)} if waiting else {}


def soonest_hold(holds: Mapping[str, AdmissionHold], now: datetime) -> float | None:
    due = [(h.until - now).total_seconds() for h in holds.values() if h.until > now]
    return max(0.0, min(due)) if due else None
