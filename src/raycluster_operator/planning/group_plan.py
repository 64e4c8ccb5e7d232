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
from typing import NamedTuple

from raycluster_operator.api.models import WorkerGroupSpec
from raycluster_operator.api.names import replica_name
from raycluster_operator.planning.actions import PlannedEvent, PodDelete
from raycluster_operator.planning.desired import hosts
from raycluster_operator.planning.feature import Feature
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
from raycluster_operator.planning.turn import (
    Deletions,
    GroupHold,
    GroupInput,
    GroupPlan,
    GroupSwitches,
    GroupTally,
    GroupTurn,
    NewReplica,
    merge_holds,
)

__all__ = [
    "GroupInput",
    "GroupPlan",
    "GroupSwitches",
    "GroupTally",
    "NewReplica",
    "plan_group",
    "tally_group",
]

#: How often a colliding replica name is redrawn before the group waits for the next pass.
NAME_ATTEMPTS = 20
#: At most this many pods are planned for creation per group and pass (whole replicas only):
#: a safety valve against a mistaken ``replicas`` of millions, well above real slice counts.
MAX_NEW_PODS_PER_PASS = 20_000


def plan_group(job: GroupInput, features: Sequence[Feature] = ()) -> GroupPlan:
    """Plan one group. ``job.stop`` (a suspend reason) removes every pod and creates nothing.
    ``features`` (planning/feature.py) have their say in rule order: host loss marks slices
    broken (rule 8a), an upgrade replaces outdated slices (12a), the crash-loop backoff holds
    indices (13a)."""
    if not job.switches.multi_host_indexing:
        flat = GroupTurn(job, _NOTHING, Deletions(job.spec.group_name))
        return _settled(features, flat, _plan_flat(job))
    found = sort_into_replicas(job.pods, hosts(job.spec))
    turn = GroupTurn(job, found, Deletions(job.spec.group_name))
    for feature in features:
        feature.mark(turn)
    tally = _tally(job.spec, job.pods, turn.found.replicas, job.desired)
    if job.stop is not None:
        return _settled(features, turn, _stopped(turn, tally, _gate(features, turn)))
    return _settled(features, turn, _planned(turn, features, tally))


def _stopped(turn: GroupTurn, tally: GroupTally, hold: GroupHold) -> GroupPlan:
    """Rule 4 for a group: every pod goes, nothing is created, every hold ends."""
    job, out = turn.job, turn.out
    stop = job.stop
    assert stop is not None
    for pod in job.pods:
        out.pod(pod, stop, f"{stop.value}: removing pod {pod.name} of group {job.spec.group_name}")
    moves = _moves(turn.found, out.items, ()) + _hold_moves((), hold.waiting, stop)
    return GroupPlan(tuple(out.items.values()), (), tally, (), moves, released=hold.waiting)


def _planned(turn: GroupTurn, features: Sequence[Feature], tally: GroupTally) -> GroupPlan:
    """Rules 8-13 in order, each feature's hooks where its rule stands."""
    job, found, out = turn.job, turn.found, turn.out
    n = hosts(job.spec)
    replaced = _unidentified(found, out, n)
    replaced += _broken(found, out)
    wanted = set(job.spec.workers_to_delete)
    _named(found, out, wanted)
    valid = [r for r in found.replicas if r.complete and r.key not in out.replica_keys]
    kept = _drop_duplicate_indices(valid, out)
    replaced += len(valid) - len(kept)
    turn.valid = kept
    spare = sum(feature.spare(turn) for feature in features)
    turn.valid = _scale_down(kept, out, job.desired, spare, job.switches)
    for feature in features:
        feature.replace(turn)
    valid = turn.valid
    need = job.desired - len(valid) if turn.need is None else turn.need
    awaited = turn.awaited | _indices_awaiting_replacement(
        found.replicas, {r.index for r in valid}, wanted, job.switches.stuck_before
    )
    turn.need = need
    hold = _gate(features, turn)  # rule 13a: the features see what is about to be created
    room = max(MAX_NEW_PODS_PER_PASS // n, 1)
    if hold.most is not None:
        room = min(room, hold.most)
    pick = _pick_indices(job.pods, valid, need, awaited, hold, room=room)
    standing_in = min(replaced, need)
    made, events = _new_replicas(
        job,
        found,
        pick.targets,
        lambda position, index: (
            hold.retry.get(index) or _create_reason(position, standing_in, turn.reasons)
        ),
    )
    moves = _moves(found, out.items, made) + _hold_moves(
        pick.reserved, pick.released, DeleteReason.SCALE_DOWN
    )
    return GroupPlan(
        tuple(out.items.values()), tuple(made), tally, tuple(events), moves, pick.released
    )


def _gate(features: Sequence[Feature], turn: GroupTurn) -> GroupHold:
    return merge_holds([feature.gate(turn) for feature in features])


def _settled(features: Sequence[Feature], turn: GroupTurn, plan: GroupPlan) -> GroupPlan:
    for feature in features:
        plan = feature.settle(turn, plan)
    return plan


#: The slices of a group planned without replica identity (gate RayMultiHostIndexing off).
_NOTHING = GroupPods((), ())


def _unidentified(found: GroupPods, out: Deletions, n: int) -> int:
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


def _broken(found: GroupPods, out: Deletions) -> int:
    """Rule 8: a broken replica goes whole, for the fault its state names; answers how many."""
    count = 0
    for replica in found.replicas:
        if replica.state is SliceState.BROKEN and replica.cause is not None:
            culprit = _culprit(replica) or replica.trigger
            out.replica(replica, replica.cause, replica.detail, culprit)
            count += 1
    return count


def _named(found: GroupPods, out: Deletions, wanted: set[str]) -> None:
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
    valid: list[Replica], out: Deletions, desired: int, surge: int, switches: GroupSwitches
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

    Rule 13a (planning/features/backoff.py): an index whose re-creation waits out a crash-loop
    backoff stays reserved, as many as are still wanted (lowest first); a retry goes back to its own
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
    job: GroupInput,
    found: GroupPods,
    targets: Sequence[int],
    reason_for: Callable[[int, int], CreateReason],
) -> tuple[list[NewReplica], list[PlannedEvent]]:
    """A replica (every host) per target index, each with a fresh replica name."""
    group, new_suffix = job.spec, job.new_suffix
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


def _create_reason(
    position: int, replacing: int, reasons: Sequence[tuple[int, CreateReason]]
) -> CreateReason:
    """Stand-ins for broken slices first, then the features' new slices (an upgrade's), in
    rule order, then scale-up."""
    if position < replacing:
        return CreateReason.REPLACE_REPLICA
    limit = replacing
    for count, reason in reasons:
        limit += count
        if position < limit:
            return reason
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


def _drop_duplicate_indices(valid: list[Replica], out: Deletions) -> list[Replica]:
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


def _plan_flat(job: GroupInput) -> GroupPlan:
    """Gate RayMultiHostIndexing off (single-host groups): KubeRay's unindexed per-pod mode.

    Pods are counted, not grouped: failed pods are replaced one by one, workersToDelete
    removes exactly the named pods, surplus removes the newest pods first.
    """
    group, pods, desired, switches, stop = job.spec, job.pods, job.desired, job.switches, job.stop
    n = hosts(group)
    want = desired * n
    out = Deletions(group.group_name)
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
