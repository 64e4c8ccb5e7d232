"""Upgrades at the level of the cluster (docs/design.md §4, rule 12a): which strategy applies,
each group's current template, the head, ``Recreate``'s all-or-nothing decision, and the
``RollingUpdate`` condition. The per-slice decisions are in ``planning/upgrade.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from raycluster_operator.api import labels
from raycluster_operator.api.models import RayCluster
from raycluster_operator.builders.template_hash import head_template_hash, worker_template_hash
from raycluster_operator.planning.actions import PodDelete
from raycluster_operator.planning.group_plan import GroupTally
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.reasons import ConditionReason, DeleteReason
from raycluster_operator.planning.upgrade import (
    GroupUpgrade,
    StrategyType,
    any_outdated,
    outdated,
    resolve_bounds,
    strategy_type,
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
