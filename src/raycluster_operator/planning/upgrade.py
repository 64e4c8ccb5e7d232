"""Upgrades (docs/design.md §4, rule 12a): what a change of pod template does to running pods.

A pod's template is current when its ``ray.io/pod-template-hash`` equals the hash of today's
spec (docs/design.md §3.8). A pod without the annotation was made before the operator wrote
it and counts as current: upgrading the operator must not recreate a running fleet.

- ``None`` (the default, KubeRay's): nothing is replaced; new slices use the new template.
- ``Recreate`` (KubeRay's): a live head or worker pod of an older template makes every pod of
  the cluster go, once; the pods come back from the new template.
- ``RollingUpdate`` (ours): worker slices are replaced whole, within ``maxUnavailable`` and
  ``maxSurge`` counted in slices per group; a head of an older template is replaced alone.

Everything here is read from the spec and the pods of this pass, nothing is remembered, so a
restarted operator resumes a rollout where the pods say it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from raycluster_operator.api.models import RayCluster, RollingUpdate
from raycluster_operator.api.problems import Problem
from raycluster_operator.planning.pods import PodView
from raycluster_operator.planning.replicas import Replica
from raycluster_operator.planning.slice_state import SliceState


class StrategyType(StrEnum):
    NONE = "None"
    RECREATE = "Recreate"
    #: Ours: KubeRay's CRD rejects this value (its enum lacks it), so under KubeRay's CRD a
    #: cluster can only use ``None`` or ``Recreate``.
    ROLLING_UPDATE = "RollingUpdate"


#: The defaults of ``rollingUpdate``, in slices.
DEFAULT_MAX_UNAVAILABLE = 1
DEFAULT_MAX_SURGE = 0
_PATH = "spec.upgradeStrategy"
_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")


@dataclass(frozen=True, slots=True)
class Bounds:
    """Resolved for one group: slices that may be unready, slices above the desired number."""

    max_unavailable: int
    max_surge: int


@dataclass(frozen=True, slots=True)
class GroupUpgrade:
    """What an upgrade asks of one worker group in this pass."""

    #: The group's current template hash.
    current: str
    #: Recreate: every serving slice goes now (some pod of the cluster is outdated).
    recreate: bool = False
    #: RollingUpdate: the resolved bounds; None for the other strategies.
    bounds: Bounds | None = None


@dataclass(frozen=True, slots=True)
class Rollout:
    """One pass of an upgrade in one group."""

    #: Serving slices to delete now (reason ``TemplateChanged``).
    victims: tuple[Replica, ...]
    #: How many slices the group creates this pass (before waiting for awaited indices).
    creates: int
    #: How many of those carry the reason ``Upgrade`` rather than ``ScaleUp``.
    upgrade_creates: int


def strategy_type(cluster: RayCluster) -> StrategyType:
    strategy = cluster.spec.upgrade_strategy
    value = strategy.type if strategy is not None else None
    try:
        return StrategyType(value) if value else StrategyType.NONE
    except ValueError:
        return StrategyType.NONE


def upgrade_problems(cluster: RayCluster) -> list[Problem]:
    """The CRD's enum checks ``type`` on the server; without it, and for the bounds (which no
    schema can check together), this does."""
    strategy = cluster.spec.upgrade_strategy
    if strategy is None:
        return []
    out: list[Problem] = []
    if strategy.type and strategy.type not in set(StrategyType):
        allowed = ", ".join(StrategyType)
        out.append(Problem(f"{_PATH}.type", f"must be one of {allowed}, not {strategy.type!r}"))
    rolling = strategy.rolling_update
    if rolling is None:
        return out
    fields = {"maxUnavailable": rolling.max_unavailable, "maxSurge": rolling.max_surge}
    for name, value in fields.items():
        if value is not None and _parse(value) is None:
            out.append(
                Problem(
                    f"{_PATH}.rollingUpdate.{name}",
                    f"must be a non-negative integer or percentage, not {value!r}",
                )
            )
    if all(_is_zero(value) for value in fields.values()):
        out.append(
            Problem(
                f"{_PATH}.rollingUpdate",
                "maxUnavailable and maxSurge cannot both be 0: no slice could ever be replaced",
            )
        )
    return out


def resolve_bounds(rolling: RollingUpdate | None, desired: int) -> Bounds:
    """Percentages of the desired slices: maxSurge rounds up, maxUnavailable down, as a
    Deployment's do; if both come to 0 (a small group), one slice may be unavailable."""
    unavailable = _scaled(
        rolling.max_unavailable if rolling else None, desired, DEFAULT_MAX_UNAVAILABLE, up=False
    )
    surge = _scaled(rolling.max_surge if rolling else None, desired, DEFAULT_MAX_SURGE, up=True)
    if unavailable == 0 and surge == 0:
        unavailable = 1
    return Bounds(unavailable, surge)


def _parse(value: int | str) -> tuple[int, bool] | None:
    """(number, is_percentage), or None when unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value, False) if value >= 0 else None
    match = _PERCENT.match(value)
    return (int(match.group(1)), True) if match else None


def _is_zero(value: int | str | None) -> bool:
    parsed = _parse(value) if value is not None else None
    return parsed is not None and parsed[0] == 0


def _scaled(value: int | str | None, desired: int, default: int, *, up: bool) -> int:
    parsed = _parse(value) if value is not None else None
    if parsed is None:
        return default
    number, percent = parsed
    if not percent:
        return number
    share = number * desired / 100
    return math.ceil(share) if up else math.floor(share)


def outdated(pod: PodView, current: str) -> bool:
    """Built from an older template. No annotation: made before it existed, counts as current."""
    return pod.template_hash is not None and pod.template_hash != current


def slice_outdated(replica: Replica, current: str) -> bool:
    return any(outdated(p, current) for p in replica.pods)


def any_outdated(pods: Iterable[PodView], current: str) -> bool:
    return any(p.live and outdated(p, current) for p in pods)


def updated_slices(replicas: Iterable[Replica], current: str) -> int:
    """Serving slices at the current template: the status' ``updatedSlices``."""
    return sum(
        1
        for r in replicas
        if r.state in (SliceState.PENDING, SliceState.READY) and not slice_outdated(r, current)
    )


def surge_allowance(valid: Sequence[Replica], upgrade: GroupUpgrade | None) -> int:
    """Slices above the desired number that scale-down (rule 12) leaves alone: a rollout's
    surge slices, for as long as an outdated slice remains to be replaced."""
    if upgrade is None or upgrade.bounds is None:
        return 0
    old = sum(1 for r in valid if slice_outdated(r, upgrade.current))
    return min(upgrade.bounds.max_surge, old)


def roll(
    valid: Sequence[Replica],
    going: Sequence[Replica],
    *,
    upgrade: GroupUpgrade,
    desired: int,
    hold_extra: bool = False,
) -> Rollout | None:
    """One pass of an upgrade over the group's serving slices ``valid`` (after workersToDelete,
    duplicates and scale-down); ``going`` are the group's deleting slices. None when there is
    nothing to upgrade.

    RollingUpdate, with B the desired slices and u, s the bounds:
    - ready slices never drop below B - u by the operator's doing: an outdated ready slice is
      deleted only while more than that are ready; an outdated pending one may always go;
    - with surge, an outdated ready slice goes only once a new slice is Ready to stand in:
      outdated + ready new slices must exceed B;
    - new slices are created up to B in all and B + s counting outdated ones;
    - ``hold_extra`` (autoscaling on, rule 12): while the group holds more than B slices
      beyond its surge, the autoscaler has lowered ``replicas`` without yet naming which
      slices go; the rollout holds, since a slice it deleted now would not come back (the
      pods cannot say it was replaced rather than removed), and lowering ``replicas`` alone
      must delete nothing.
    """
    current = upgrade.current
    old = [r for r in valid if slice_outdated(r, current)]
    old_keys = {r.key for r in old}
    in_flight = sum(1 for r in going if slice_outdated(r, current))
    if upgrade.bounds is None:
        if not upgrade.recreate:
            return None
        victims = tuple(valid)
        return Rollout(victims, desired, min(desired, len(victims) + in_flight))
    if not old and not in_flight:
        return None
    total = len(valid)
    bounds = upgrade.bounds
    if hold_extra and total - min(bounds.max_surge, len(old)) > desired:
        return Rollout((), 0, 0)
    size = desired
    ready = sum(1 for r in valid if r.state is SliceState.READY)
    ready_new = sum(1 for r in valid if r.state is SliceState.READY and r.key not in old_keys)
    allowed = ready - (size - bounds.max_unavailable)
    if bounds.max_surge > 0:
        allowed = min(allowed, len(old) + ready_new - size)
    pending_old = [r for r in old if r.state is not SliceState.READY]
    ready_old = sorted(
        (r for r in old if r.state is SliceState.READY), key=lambda r: (r.index or 0, r.key)
    )
    victims = (*pending_old, *ready_old[: max(allowed, 0)])
    left = total - len(victims)
    fresh = total - len(old)
    creates = max(0, min(size + bounds.max_surge - left, size - fresh))
    # The pods do not say whether a missing slice was replaced or never there, so while a
    # rollout is under way every new slice is counted as the upgrade's (a scale-up included).
    return Rollout(victims, creates, creates)
