"""docs/design.md §4, rules 8-13, for one worker group: which pods go, which replicas are made.

The decision is a function of the group spec, the group's pods and a few switches; it never
looks at another group's pods, so nothing outside the group can be deleted by it.

The index policy (docs/design.md §4, rule 13), autoscaling on and off alike: a healthy
replica keeps its index for life and is deleted only by scale-down or workersToDelete, never
to compact indices (a running TPU job would die for a cosmetic gain: Ray and JAX identify a
slice by TPU_NAME, not by density); a new replica takes the lowest index no pod carries;
scale-down without workersToDelete removes the highest indices first; a broken replica comes
back at its own index.

Where this differs from KubeRay, on purpose: every broken replica goes in one pass (KubeRay:
one incomplete replica per pass), oversized and duplicate-host replicas are broken (KubeRay
keeps them), a terminating host breaks its replica (KubeRay ignores it), unlabelled pods are
replaced (KubeRay leaks them), surplus goes from the highest index (KubeRay: map order), and
a broken replica's replacement waits for its old index to be released instead of taking a
higher one, so a slice comes back with its own index, hostnames and TPU_NAME.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.api.names import replica_name
from raycluster_operator.planning.actions import PlannedEvent, PodDelete
from raycluster_operator.planning.backoff import NO_HOLD, GroupHold
from raycluster_operator.planning.desired import hosts
from raycluster_operator.planning.disruption import (
    DEFAULT_MAX_UNAVAILABLE,
    NO_DISRUPTIONS,
    NO_MOVES,
    DisruptionCheck,
    GroupMoves,
    budgeted,
    mark_evictions,
    plan_moves,
    surge_for,
)
from raycluster_operator.planning.host_loss import HostFault, host_fault, mark_host_faults
from raycluster_operator.planning.indices import lowest_free
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import (
    CreateReason,
    DeleteReason,
    EventReason,
    HoldReason,
)
from raycluster_operator.planning.replicas import GroupPods, Replica, sort_into_replicas
from raycluster_operator.planning.slice_state import (
    SERVING,
    SliceState,
    SliceTransition,
    check_transition,
    derive_state,
)
from raycluster_operator.planning.upgrade import (
    GroupUpgrade,
    Rollout,
    roll,
    surge_allowance,
    updated_slices,
)

#: How often a colliding replica name is redrawn before the group waits for the next pass.
NAME_ATTEMPTS = 20
#: At most this many pods are planned for creation per group and pass (whole replicas only):
#: a safety valve against a mistaken ``replicas`` of millions, well above real slice counts.
MAX_NEW_PODS_PER_PASS = 20_000


@dataclass(frozen=True, slots=True)
class NewReplica:
    """A replica to create: every one of its hosts is created in the same plan (rule 13)."""

    index: int | None
    name: str | None
    #: Host indices to create; ``(None,)`` for a single-host replica.
    hosts: tuple[int | None, ...]
    reason: CreateReason


@dataclass(frozen=True, slots=True)
class GroupTally:
    """What the status reports for one group: observed counts, before the plan is applied."""

    group: str
    num_of_hosts: int
    desired_slices: int
    ready_slices: int
    broken_slices: int
    ready_pods: int
    running_pods: int
    #: How many slices are in each state (absent ones are not counted).
    slices: Mapping[SliceState, int] = field(default_factory=dict)
    #: Serving slices of the current template (rule 12a); None when not computed.
    updated_slices: int | None = None
    #: Planned disruptions (rule 12b): the disrupted slices still serving, as status entries.
    disrupted: tuple[Mapping[str, object], ...] = ()

    @property
    def desired_pods(self) -> int:
        return self.desired_slices * self.num_of_hosts


@dataclass(frozen=True, slots=True)
class GroupPlan:
    deletes: tuple[PodDelete, ...]
    replicas: tuple[NewReplica, ...]
    tally: GroupTally
    events: tuple[PlannedEvent, ...] = ()
    #: Every slice this plan moves, checked against ``slice_state.TRANSITIONS``.
    transitions: tuple[SliceTransition, ...] = ()
    #: Crash-loop backoff (rule 13a): waiting indices no longer wanted (fewer replicas); their
    #: backoff ends.
    released: tuple[int, ...] = ()
    #: Planned disruptions (rule 12b): the moves of this pass, and the slices (replica names)
    #: whose PodDisruptionBudget is kept.
    moves: GroupMoves = NO_MOVES
    budgeted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSwitches:
    """How the group may change, decided once per cluster."""

    #: Surplus replicas are removed (autoscaling off, or ENABLE_RANDOM_POD_DELETE).
    scale_down: bool
    #: Feature gate RayMultiHostIndexing.
    multi_host_indexing: bool = True
    #: Terminating pods whose deletion deadline is before this time (RFC 3339) are stuck, as
    #: on a lost node; a broken replica's replacement stops waiting for the index they hold
    #: and takes the lowest free one instead. "" = never.
    stuck_before: str = ""


class _Deletions:
    """Collects deletes, once per pod, never for a pod that is already terminating."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.items: dict[str, PodDelete] = {}
        self.replica_keys: set[str] = set()

    def pod(
        self,
        pod: PodView,
        reason: DeleteReason,
        message: str,
        replica: Replica | None = None,
        trigger: str | None = None,
    ) -> None:
        if pod.terminating or pod.name in self.items:
            return
        self.items[pod.name] = PodDelete(
            name=pod.name,
            group=self.group,
            replica_name=pod.replica_name,
            reason=reason,
            message=message,
            replica_index=replica.index if replica else pod.replica_index,
            host_index=pod.host_index,
            uid=pod.uid,
            trigger=trigger,
        )

    def replica(
        self, replica: Replica, reason: DeleteReason, message: str, trigger: str | None = None
    ) -> None:
        self.replica_keys.add(replica.key)
        for pod in replica.pods:
            self.pod(pod, reason, message, replica, trigger)


def plan_group(
    group: WorkerGroupSpec,
    pods: Sequence[PodView],
    *,
    desired: int,
    switches: GroupSwitches,
    new_suffix: Callable[[], str],
    stop: DeleteReason | None = None,
    host_faults: Mapping[str, HostFault] | None = None,
    upgrade: GroupUpgrade | None = None,
    hold: GroupHold = NO_HOLD,
    disruption: DisruptionCheck = NO_DISRUPTIONS,
    max_unavailable: int = DEFAULT_MAX_UNAVAILABLE,
) -> GroupPlan:
    """Plan one group. ``stop`` (a suspend reason) removes every pod and creates nothing.
    ``host_faults`` (planning/host_loss.py): pods whose node or lost readiness break their
    slice; ``upgrade`` replaces slices of an older template (planning/upgrade.py); ``hold`` is
    the crash-loop backoff's word on which indices wait (planning/backoff.py); ``disruption``
    says which hosts' nodes are about to go (planning/disruption.py, rule 12b), and
    ``max_unavailable`` how many slices the group's planned disruptions may take at once."""
    if not switches.multi_host_indexing:
        return _plan_flat(group, pods, desired=desired, switches=switches, stop=stop)
    n = hosts(group)
    found = sort_into_replicas(pods, n)
    # Rule 8, host loss: a host on a lost node, or unready too long, breaks its slice.
    found = mark_host_faults(found, host_faults or {})
    found = mark_evictions(found, disruption)
    out = _Deletions(group.group_name)
    tally = _tally(group, pods, found.replicas, desired)
    if upgrade is not None:
        tally = replace(tally, updated_slices=updated_slices(found.replicas, upgrade.current))
    if stop is not None:
        for pod in pods:
            out.pod(pod, stop, f"{stop.value}: removing pod {pod.name} of group {group.group_name}")
        stopped = _moves(found, out.items, ()) + _hold_moves((), hold.waiting, stop)
        return GroupPlan(tuple(out.items.values()), (), tally, (), stopped, released=hold.waiting)

    replaced = _unidentified(found, out, n)
    replaced += _broken(found, out, host_faults)
    wanted = set(group.workers_to_delete)
    _named(found, out, wanted)
    valid = [r for r in found.replicas if r.complete and r.key not in out.replica_keys]
    kept = _drop_duplicate_indices(valid, out)
    replaced += len(valid) - len(kept)
    surge = surge_allowance(kept, upgrade) + surge_for(kept, disruption, max_unavailable)
    valid = _scale_down(kept, out, desired, surge, switches)

    # Rule 12a: an upgrade replaces outdated slices whole, within its bounds.
    rollout = (
        _upgrade(found, valid, out, upgrade, desired, hold_extra=not switches.scale_down)
        if upgrade is not None
        else None
    )
    if rollout is not None:
        valid = [r for r in valid if r.key not in out.replica_keys]

    # Rule 12b: planned disruptions move slices whole, make-before-break.
    moves = (
        plan_moves(valid, disruption, desired=desired, max_unavailable=max_unavailable)
        if disruption.enabled
        else NO_MOVES
    )
    for move in moves.deletes:
        out.replica(move.replica, move.reason, move.message, move.trigger)
    valid = [r for r in valid if r.key not in out.replica_keys]

    need = rollout.creates if rollout is not None else desired - len(valid)
    # Stand-ins for ready disrupted slices come on top of what the group needs otherwise.
    ordinary = max(need, 0)
    need = ordinary + max(desired + moves.surge - len(valid), 0) - max(desired - len(valid), 0)
    awaited = _indices_awaiting_replacement(
        found.replicas, {r.index for r in valid}, wanted, switches.stuck_before
    )
    if rollout is not None:
        # Without surge the new slice takes the index of the one it replaces (rule 13).
        awaited |= {r.index for r in rollout.victims if r.index is not None}
    pick = _pick_indices(pods, valid, need, awaited, hold, room=max(MAX_NEW_PODS_PER_PASS // n, 1))
    made, events = _new_replicas(
        group,
        found,
        pick.targets,
        lambda position, index: (
            hold.retry.get(index)
            or (
                CreateReason.SLICE_MOVE
                if position >= ordinary
                else _create_reason(position, min(replaced, need), rollout)
            )
        ),
        new_suffix,
    )
    transitions = _moves(found, out.items, made) + _hold_moves(
        pick.reserved, pick.released, DeleteReason.SCALE_DOWN
    )
    kept_budgets = budgeted(found.replicas, moves, out.replica_keys) if disruption.enabled else []
    tally = replace(tally, disrupted=moves.disrupted)
    return GroupPlan(
        tuple(out.items.values()),
        tuple(made),
        tally,
        tuple(events),
        transitions,
        pick.released,
        moves=moves,
        budgeted=tuple(kept_budgets),
    )


def _unidentified(found: GroupPods, out: _Deletions, n: int) -> int:
    """Rule 9: no pod of the group is left behind for lack of labels. Answers how many
    replicas' worth of live pods go (their replacements count as replacing)."""
    for pod in found.unidentified:
        out.pod(
            pod,
            DeleteReason.POD_WITHOUT_REPLICA_IDENTITY,
            f"pod {pod.name} has no replica identity labels; it is replaced by a labelled replica",
            trigger=pod.name,
        )
    return -(-sum(1 for p in found.unidentified if not p.terminating) // n)


def _broken(found: GroupPods, out: _Deletions, host_faults: Mapping[str, HostFault] | None) -> int:
    """Rule 8: a broken replica goes whole, for the fault its state names; answers how many."""
    count = 0
    for replica in found.replicas:
        if replica.state is SliceState.BROKEN and replica.cause is not None:
            culprit = _culprit(replica) or _host_culprit(replica, host_faults)
            out.replica(replica, replica.cause, replica.detail, culprit)
            count += 1
    return count


def _named(found: GroupPods, out: _Deletions, wanted: set[str]) -> None:
    """Rule 10: a named host takes its replica with it, in this same pass."""
    if not wanted:
        return
    for replica in found.replicas:
        if replica.key in out.replica_keys:
            continue
        named = next((p.name for p in replica.pods if p.name in wanted), None)
        if named is not None:
            what = f"replica {replica.name}" if replica.name else f"pod {named}"
            out.replica(
                replica,
                DeleteReason.WORKERS_TO_DELETE,
                f"{named} is listed in workersToDelete; deleting {what}",
                named,
            )


def _scale_down(
    valid: list[Replica], out: _Deletions, desired: int, surge: int, switches: GroupSwitches
) -> list[Replica]:
    """Rule 12: surplus goes from the top, so the lowest indices (the oldest work) stay; an
    upgrade's ``surge`` slices are not surplus (rule 12a)."""
    surplus = len(valid) - desired - surge
    if not switches.scale_down or surplus <= 0:
        return valid
    victims = sorted(valid, key=lambda r: (r.index or 0, r.age_key), reverse=True)[:surplus]
    for replica in victims:
        out.replica(
            replica,
            DeleteReason.SCALE_DOWN,
            f"{len(valid)} replicas exist and {desired} are desired; removing replica "
            f"index {replica.index}",
        )
    return [r for r in valid if r.key not in out.replica_keys]


class _Pick(NamedTuple):
    #: Indices to create slices at, retries first.
    targets: list[int]
    #: Indices held for a crash-loop backoff this pass.
    reserved: list[int]
    #: Held indices no longer wanted: their backoff ends.
    released: tuple[int, ...]


def _pick_indices(
    pods: Sequence[PodView],
    valid: Sequence[Replica],
    need: int,
    awaited: set[int],
    hold: GroupHold,
    *,
    room: int,
) -> _Pick:
    """Rule 13 (docs/design.md §4): a new replica takes the lowest free index, free meaning
    no pod with it exists at all, so hostnames and TPU_NAME never name two slices at once. A
    slice that broke comes back at its own index, so the job restarting on it finds the same
    hostnames and TPU_NAME: while the old pods still hold that index (``awaited``), the
    replacement waits (seconds, normally) rather than take another. A slice removed on
    purpose (workersToDelete) frees its index for anyone. Healthy replicas are never moved: a
    gap below them stays until a new replica fills it.

    Rule 13a (planning/backoff.py): an index whose re-creation waits out a crash-loop backoff
    stays reserved, as many as are still wanted (lowest first); a retry goes back to its own
    index first."""
    taken = {i for i in (p.replica_index for p in pods) if i is not None}
    free = need - min(len(awaited), need)
    serving = {r.index for r in valid}
    held = [i for i in hold.waiting if i not in awaited and i not in serving]
    reserved, released = held[: max(free, 0)], tuple(held[max(free, 0) :])
    count = min(free - len(reserved), room)
    retry = [i for i in hold.retry if i not in taken][: max(count, 0)]
    targets = retry + lowest_free(taken | set(reserved) | set(retry), count - len(retry))
    return _Pick(targets, reserved, released)


def _new_replicas(
    group: WorkerGroupSpec,
    found: GroupPods,
    targets: Sequence[int],
    reason_for: Callable[[int, int], CreateReason],
    new_suffix: Callable[[], str],
) -> tuple[list[NewReplica], list[PlannedEvent]]:
    """A replica (every host) per target index, each with a fresh replica name."""
    n = hosts(group)
    names = {r.name for r in found.replicas if r.name is not None}
    events: list[PlannedEvent] = []
    made: list[NewReplica] = []
    for position, index in enumerate(targets):
        reason = reason_for(position, index)
        if n == 1:
            made.append(NewReplica(index, None, (None,), reason))
            continue
        name = _fresh_name(group.group_name, names, new_suffix)
        if name is None:
            events.append(
                PlannedEvent(
                    "Warning",
                    EventReason.REPLICA_NAME_COLLISION,
                    f"group {group.group_name}: {NAME_ATTEMPTS} replica names in a row were "
                    "already taken; retrying on the next pass",
                )
            )
            break
        made.append(NewReplica(index, name, tuple(range(n)), reason))
    return made, events


def _upgrade(
    found: GroupPods,
    valid: Sequence[Replica],
    out: _Deletions,
    upgrade: GroupUpgrade,
    desired: int,
    *,
    hold_extra: bool,
) -> Rollout | None:
    """Rule 12a (planning/upgrade.py): delete this pass's outdated slices, whole."""
    going = [r for r in found.replicas if r.state is SliceState.DELETING]
    rollout = roll(valid, going, upgrade=upgrade, desired=desired, hold_extra=hold_extra)
    if rollout is not None:
        for replica in rollout.victims:
            what = f"slice {replica.name}" if replica.name else f"pod {replica.key}"
            out.replica(
                replica,
                DeleteReason.TEMPLATE_CHANGED,
                f"{what} was built from an older pod template; it is replaced by one of "
                f"template {upgrade.current}",
            )
    return rollout


def _create_reason(position: int, replacing: int, rollout: Rollout | None) -> CreateReason:
    """Stand-ins for broken slices first, then the upgrade's new slices, then scale-up."""
    if position < replacing:
        return CreateReason.REPLACE_REPLICA
    if rollout is not None and position < replacing + rollout.upgrade_creates:
        return CreateReason.UPGRADE
    return CreateReason.SCALE_UP


def _moves(
    found: GroupPods, deletes: Mapping[str, PodDelete], made: Sequence[NewReplica]
) -> tuple[SliceTransition, ...]:
    """The slices this plan moves, each checked against the table (a rule that would move a
    slice some way the table does not name raises instead of acting)."""
    moves: list[SliceTransition] = []
    if deletes:
        for replica in found.replicas:
            going = next((deletes[p.name] for p in replica.pods if p.name in deletes), None)
            if going is not None:
                moves.append(
                    SliceTransition(replica.key, replica.state, SliceState.DELETING, going.reason)
                )
        for pod in found.unidentified:
            if pod.name in deletes:
                # A pod without identity is a slice of its own that cannot serve.
                moves.append(
                    SliceTransition(
                        pod.name, SliceState.BROKEN, SliceState.DELETING, deletes[pod.name].reason
                    )
                )
    for new in made:
        key = new.name or f"index {new.index}"
        source = SliceState.BACKOFF if new.reason in _RETRIES else SliceState.ABSENT
        moves.append(SliceTransition(key, source, SliceState.PENDING, new.reason))
    return tuple(map(check_transition, moves))


#: Creates that end a crash-loop backoff (the slice was in state BACKOFF).
_RETRIES = frozenset({CreateReason.BACKOFF_RETRY, CreateReason.TEMPLATE_FIXED})


def _hold_moves(
    kept: Sequence[int], released: Sequence[int], why: DeleteReason
) -> tuple[SliceTransition, ...]:
    """Rule 13a: indices held in backoff this pass, and those whose backoff ends for ``why``."""
    moves = [
        SliceTransition(
            f"index {i}", SliceState.ABSENT, SliceState.BACKOFF, HoldReason.SLICE_BACKOFF
        )
        for i in kept
    ]
    moves += [
        SliceTransition(f"index {i}", SliceState.BACKOFF, SliceState.ABSENT, why) for i in released
    ]
    return tuple(map(check_transition, moves))


def _culprit(replica: Replica) -> str | None:
    """The pod that broke the replica, for the Event: failed first, then terminating."""
    for pod in replica.pods:
        if pod.failed:
            return pod.name
    for pod in replica.pods:
        if pod.terminating:
            return pod.name
    return None


def _host_culprit(replica: Replica, faults: Mapping[str, HostFault] | None) -> str | None:
    fault = host_fault(replica, faults) if faults else None
    return fault.pod if fault is not None else None


def _indices_awaiting_replacement(
    replicas: Sequence[Replica], live: set[int | None], wanted: set[str], stuck_before: str
) -> set[int]:
    """Indices of broken replicas whose pods still exist, that a replacement should wait for.

    Not awaited: indices a healthy replica holds, replicas named in workersToDelete (their
    removal was asked for), and pods stuck terminating past their deadline (a lost node).
    """
    awaited: set[int] = set()
    for replica in replicas:
        index = replica.index
        if replica.state in SERVING or index is None or index in live:
            continue
        if any(p.name in wanted for p in replica.pods):
            continue
        if stuck_before and all(
            p.deletion_deadline is not None and p.deletion_deadline < stuck_before
            for p in replica.pods
        ):
            continue
        awaited.add(index)
    return awaited


def _drop_duplicate_indices(valid: list[Replica], out: _Deletions) -> list[Replica]:
    """Two complete replicas with one index: the older keeps it (its hostnames came first)."""
    by_index: dict[int | None, list[Replica]] = {}
    for replica in valid:
        by_index.setdefault(replica.index, []).append(replica)
    kept: list[Replica] = []
    for index, members in by_index.items():
        if len(members) == 1:
            kept.append(members[0])
            continue
        members.sort(key=lambda r: r.age_key)
        kept.append(members[0])
        for replica in members[1:]:
            out.replica(
                replica,
                DeleteReason.DUPLICATE_REPLICA_INDEX,
                f"replica {replica.key} shares index {index} with the older {members[0].key}",
            )
    return kept


def _fresh_name(group: str, names: set[str], new_suffix: Callable[[], str]) -> str | None:
    for _ in range(NAME_ATTEMPTS):
        name = replica_name(group, new_suffix())
        if name not in names:
            names.add(name)
            return name
    return None


def tally_group(
    group: WorkerGroupSpec, pods: Sequence[PodView], *, desired: int, multi_host_indexing: bool
) -> GroupTally:
    """The group's observed counts, also for a group that is not acted on (invalid spec)."""
    if multi_host_indexing:
        return _tally(group, pods, sort_into_replicas(pods, hosts(group)).replicas, desired)
    n = hosts(group)
    ready = sum(1 for p in pods if p.running_and_ready)
    return GroupTally(
        group=group.group_name,
        num_of_hosts=n,
        desired_slices=desired,
        # KubeRay's unindexed mode counts pods, and has no notion of a broken slice.
        ready_slices=ready // n,
        broken_slices=0,
        ready_pods=ready,
        running_pods=sum(1 for p in pods if p.live and p.running),
        slices=Counter(_pod_state(p) for p in pods),
    )


def _pod_state(pod: PodView) -> SliceState:
    """Unindexed mode: every pod is a slice of its own."""
    return derive_state((pod,), 1, name=None, index=None).state


def _tally(
    group: WorkerGroupSpec, pods: Sequence[PodView], replicas: Sequence[Replica], desired: int
) -> GroupTally:
    states = Counter(r.state for r in replicas)
    return GroupTally(
        group=group.group_name,
        num_of_hosts=hosts(group),
        desired_slices=desired,
        ready_slices=states[SliceState.READY],
        broken_slices=states[SliceState.BROKEN],
        ready_pods=sum(1 for p in pods if p.running_and_ready),
        running_pods=sum(1 for p in pods if p.live and p.running),
        slices=states,
    )


def _plan_flat(
    group: WorkerGroupSpec,
    pods: Sequence[PodView],
    *,
    desired: int,
    switches: GroupSwitches,
    stop: DeleteReason | None,
) -> GroupPlan:
    """Gate RayMultiHostIndexing off (single-host groups): KubeRay's unindexed per-pod mode.

    Pods are counted, not grouped: failed pods are replaced one by one, workersToDelete
    removes exactly the named pods, surplus removes the newest pods first.
    """
    n = hosts(group)
    want = desired * n
    out = _Deletions(group.group_name)
    tally = tally_group(group, pods, desired=desired, multi_host_indexing=False)
    states = {p.name: _pod_state(p) for p in pods}
    if stop is not None:
        for pod in pods:
            out.pod(pod, stop, f"{stop.value}: removing pod {pod.name} of group {group.group_name}")
        moves = _flat_moves(states, out.items, ())
        return GroupPlan(tuple(out.items.values()), (), tally, (), moves)
    wanted = set(group.workers_to_delete)
    for pod in pods:
        if states[pod.name] is SliceState.BROKEN:
            out.pod(pod, DeleteReason.POD_FAILED, f"pod {pod.name} failed")
        elif pod.name in wanted:
            out.pod(pod, DeleteReason.WORKERS_TO_DELETE, f"{pod.name} is listed in workersToDelete")
    remaining = [p for p in pods if states[p.name] in SERVING and p.name not in out.items]
    surplus = len(remaining) - want
    if switches.scale_down and surplus > 0:
        newest = sorted(remaining, key=lambda p: (p.created, p.name), reverse=True)[:surplus]
        for pod in newest:
            out.pod(pod, DeleteReason.SCALE_DOWN, f"{len(remaining)} pods exist, {want} desired")
    need = want - len(remaining)
    replaced = sum(1 for d in out.items.values() if d.reason is DeleteReason.POD_FAILED)
    made = tuple(
        NewReplica(
            None,
            None,
            (None,),
            CreateReason.REPLACE_REPLICA if i < replaced else CreateReason.SCALE_UP,
        )
        for i in range(max(need, 0))
    )
    moves = _flat_moves(states, out.items, made)
    return GroupPlan(tuple(out.items.values()), made, tally, (), moves)


def _flat_moves(
    states: Mapping[str, SliceState], deletes: Mapping[str, PodDelete], made: Sequence[NewReplica]
) -> tuple[SliceTransition, ...]:
    moves = [
        SliceTransition(name, states[name], SliceState.DELETING, d.reason)
        for name, d in deletes.items()
    ]
    moves += [
        SliceTransition("new pod", SliceState.ABSENT, SliceState.PENDING, new.reason)
        for new in made
    ]
    return tuple(map(check_transition, moves))
