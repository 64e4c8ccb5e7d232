"""Upgrades at the level of the cluster (docs/design.md §4, rule 12a): which strategy applies,
each group's current template, the head, ``Recreate``'s all-or-nothing decision, and the
``RollingUpdate`` condition; and ``Upgrades``, the lifecycle feature that plugs rule 12a into
the planner. The per-slice decisions are in ``planning/upgrade.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders.template_hash import head_template_hash, worker_template_hash
from raycluster_operator.planning.actions import PodDelete
from raycluster_operator.planning.desired import desired_slices
from raycluster_operator.planning.feature import Feature
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import (
    Condition,
    ConditionReason,
    ConditionType,
    CreateReason,
    DeleteReason,
)
from raycluster_operator.planning.slice_state import SliceState
from raycluster_operator.planning.turn import ClusterTurn, GroupPlan, GroupTally, GroupTurn
from raycluster_operator.planning.upgrade import (
    GroupUpgrade,
    StrategyType,
    any_outdated,
    outdated,
    resolve_bounds,
    roll,
    strategy_type,
    surge_allowance,
    updated_slices,
)


@dataclass(frozen=True)
class ClusterUpgrade:
    strategy: StrategyType
    head_hash: str
    #: Worker group name -> what the upgrade asks of it this pass.
    groups: Mapping[str, GroupUpgrade] = field(default_factory=dict)
    #: Recreate: some live pod is outdated, so every pod goes this pass.
    recreate: bool = False
    #: Pods of an older template exist (live or terminating).
    pending: bool = False


def plan_upgrade(
    cluster: RayCluster,
    heads: Sequence[PodView],
    by_group: Mapping[str, Sequence[PodView]],
    desired: Mapping[str, int],
) -> ClusterUpgrade:
    strategy = strategy_type(cluster)
    head_hash = head_template_hash(cluster)
    currents = {
        g.group_name: worker_template_hash(cluster, g) for g in cluster.spec.worker_group_specs
    }
    pending = any(outdated(p, head_hash) for p in heads) or any(
        outdated(p, currents[name]) for name, pods in by_group.items() for p in pods
    )
    recreate = strategy is StrategyType.RECREATE and (
        any_outdated(heads, head_hash)
        or any(any_outdated(pods, currents[name]) for name, pods in by_group.items())
    )
    spec = cluster.spec.upgrade_strategy
    rolling = spec.rolling_update if spec is not None else None
    groups = {
        name: GroupUpgrade(
            current,
            recreate=recreate,
            bounds=resolve_bounds(rolling, desired.get(name, 0))
            if strategy is StrategyType.ROLLING_UPDATE
            else None,
        )
        for name, current in currents.items()
    }
    return ClusterUpgrade(strategy, head_hash, groups, recreate, pending)


def head_deletes(upgrade: ClusterUpgrade, heads: Iterable[PodView]) -> list[PodDelete]:
    """Recreate: every live head goes with the workers. RollingUpdate: a head of an older
    template goes alone (rule 5 brings the new one once no head pod is left)."""
    if upgrade.strategy is StrategyType.RECREATE and upgrade.recreate:
        chosen = [p for p in heads if p.live]
    elif upgrade.strategy is StrategyType.ROLLING_UPDATE:
        chosen = [p for p in heads if p.live and outdated(p, upgrade.head_hash)]
    else:
        return []
    return [
        PodDelete(
            pod.name,
            labels.HEAD_GROUP,
            None,
            DeleteReason.TEMPLATE_CHANGED,
            f"head {pod.name} is replaced by one of template {upgrade.head_hash} "
            f"({upgrade.strategy.value})",
            uid=pod.uid,
        )
        for pod in chosen
    ]


def rollout_condition(
    upgrade: ClusterUpgrade, tallies: Sequence[GroupTally], *, paused: bool
) -> tuple[bool, ConditionReason, str] | None:
    """The RollingUpdate condition, for that strategy only; its message changes only when a
    slice is replaced, so a finished rollout costs no status writes."""
    if upgrade.strategy is not StrategyType.ROLLING_UPDATE:
        return None
    counts = ", ".join(
        f"{t.group} {t.updated_slices or 0}/{t.desired_slices} slices updated" for t in tallies
    )
    if paused:
        return True, ConditionReason.ROLLOUT_PAUSED, f"the cluster is suspended; {counts}"
    if upgrade.pending:
        return True, ConditionReason.ROLLOUT_PROGRESSING, counts
    return False, ConditionReason.ROLLOUT_COMPLETE, counts


class Upgrades(Feature):
    """Rule 12a as a lifecycle feature: outdated slices are replaced whole, within the
    strategy's bounds; an outdated head goes; the RollingUpdate condition is reported."""

    rule = "12a"

    def __init__(self, turn: ClusterTurn) -> None:
        desired = {
            g.group_name: desired_slices(g, cluster_suspended=turn.suspended)
            for g in turn.cluster.spec.worker_group_specs
        }
        self.upgrade = plan_upgrade(turn.cluster, turn.heads, turn.by_group, desired)
        self.rollout: Condition | None = None

    def _group(self, turn: GroupTurn) -> GroupUpgrade | None:
        return self.upgrade.groups.get(turn.job.spec.group_name)

    def spare(self, turn: GroupTurn) -> int:
        """Scale-down (rule 12) leaves a rollout's surge slices alone."""
        return surge_allowance(turn.valid, self._group(turn))

    def replace(self, turn: GroupTurn) -> None:
        """Delete this pass's outdated slices, whole; without surge each new slice takes the
        index of the one it replaces (rule 13)."""
        upgrade = self._group(turn)
        if upgrade is None:
            return
        job = turn.job
        going = [r for r in turn.found.replicas if r.state is SliceState.DELETING]
        rollout = roll(
            turn.valid,
            going,
            upgrade=upgrade,
            desired=job.desired,
            hold_extra=not job.switches.scale_down,
        )
        if rollout is None:
            return
        for replica in rollout.victims:
            what = f"slice {replica.name}" if replica.name else f"pod {replica.key}"
            turn.out.replica(
                replica,
                DeleteReason.TEMPLATE_CHANGED,
                f"{what} was built from an older pod template; it is replaced by one of "
                f"template {upgrade.current}",
            )
        turn.valid = [r for r in turn.valid if r.key not in turn.out.replica_keys]
        turn.need = rollout.creates
        turn.awaited |= {r.index for r in rollout.victims if r.index is not None}
        turn.reasons.append((rollout.upgrade_creates, CreateReason.UPGRADE))

    def settle(self, turn: GroupTurn, plan: GroupPlan) -> GroupPlan:
        """The group's ``updatedSlices`` (indexed groups only)."""
        upgrade = self._group(turn)
        if upgrade is None or not turn.job.switches.multi_host_indexing:
            return plan
        count = updated_slices(turn.found.replicas, upgrade.current)
        return replace(plan, tally=replace(plan.tally, updated_slices=count))

    def finish(self, turn: ClusterTurn) -> None:
        stopping = turn.suspended or turn.suspending
        if turn.acting and not stopping:
            going = {d.name for d in turn.deletes}
            turn.deletes += [
                d for d in head_deletes(self.upgrade, turn.heads) if d.name not in going
            ]
        said = rollout_condition(self.upgrade, turn.tallies, paused=stopping)
        if said is not None:
            self.rollout = Condition(ConditionType.ROLLING_UPDATE, *said)

    def conditions(self) -> Sequence[Condition]:
        return () if self.rollout is None else (self.rollout,)
