"""How a Job's pods count, as kube-controller-manager's Job controller counts them
(``pkg/controller/job``; docs/design.md §8, "Jobs"): which pod is failed, what its
``podFailurePolicy`` says of it, and the backoff before a failed pod is replaced.

Pure functions of pods and a small record; the controller (``jobs.py``) does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from kubefacts.objects import Obj
from kubefacts.timestamps import parse_time

#: kube's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff (seconds).
DEFAULT_BACKOFF = (10.0, 600.0)


def _meta(pod: Obj) -> Obj:
    return pod.get("metadata") or {}


def _phase(pod: Obj) -> str | None:
    return (pod.get("status") or {}).get("phase")


def only_replace_failed(spec: Obj) -> bool:
    """A deleted pod is failed only once its phase is Failed (podReplacementPolicy Failed, or a
    podFailurePolicy, which needs the pod's final status to match)."""
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_failed(pod: Obj, spec: Obj) -> bool:
    """kube's ``isPodFailed``: Failed, or deleted before it succeeded (an orphan that never
    reaches Failed still counts)."""
    if _phase(pod) == "Failed":
        return True
    if only_replace_failed(spec):
        return False
    return bool(_meta(pod).get("deletionTimestamp")) and _phase(pod) != "Succeeded"


def finished_at(pod: Obj, now: datetime) -> datetime:
    """kube's ``getFinishedTime``: the last container end, else the deletion, else now."""
    ends = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        stamp = ((status.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if stamp:
            ends.append(parse_time(str(stamp)))
    if ends:
        return max(ends)
    deleted = _meta(pod).get("deletionTimestamp")
    return parse_time(str(deleted)) if deleted else now


@dataclass(frozen=True)
class Match:
    """What a failed pod's podFailurePolicy says: count it against backoffLimit or not, and
    the FailJob message when a FailJob rule matched."""

    counts: bool = True
    fail_job: str | None = None


def match_policy(policy: Obj | None, pod: Obj) -> Match:
    """kube's ``matchPodFailurePolicy``: the first rule that matches decides."""
    if policy is None:
        return Match()
    status = pod.get("status") or {}
    namespace, name = _meta(pod).get("namespace"), _meta(pod).get("name")
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            found = _exit_code_match(status, rule["onExitCodes"])
            if found is None:
                continue
            container, code = found
            message = (
                f"Container {container} for pod {namespace}/{name} failed with exit code {code} "
                f"matching {action} rule at index {index}"
            )
        elif rule.get("onPodConditions"):
            kind = _condition_match(status, rule["onPodConditions"])
            if kind is None:
                continue
            message = (
                f"Pod {namespace}/{name} has condition {kind} matching {action} rule "
                f"at index {index}"
            )
        else:
            continue
        if action == "Ignore":
            return Match(counts=False)
        if action == "FailJob":
            return Match(fail_job=message)
        return Match()  # Count
    return Match()


def _exit_code_match(status: Obj, requirement: Obj) -> tuple[str, int] | None:
    wanted = requirement.get("containerName")
    values = set(requirement.get("values") or [])
    operator = requirement.get("operator")
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(key) or []:
            ended = (container.get("state") or {}).get("terminated")
            if not ended or (wanted is not None and wanted != container.get("name")):
                continue
            code = int(ended.get("exitCode") or 0)
            if code == 0:
                continue
            if (operator == "In" and code in values) or (
                operator == "NotIn" and code not in values
            ):
                return str(container.get("name")), code
    return None


def _condition_match(status: Obj, patterns: list[Obj]) -> str | None:
    for condition in status.get("conditions") or []:
        for pattern in patterns:
            if condition.get("type") == pattern.get("type") and condition.get(
                "status"
            ) == pattern.get("status", "True"):
                return str(condition.get("type"))
    return None


@dataclass
class Backoff:
    """kube's ``backoffRecord``: failures since the last success, and when the last one was."""

    failures: int = 0
    last_failure: datetime | None = None

    def update(self, succeeded: list[datetime], failed: list[datetime]) -> Backoff:
        """The record after newly finished pods (their finish times)."""
        if not succeeded:
            if not failed:
                return self
            return Backoff(self.failures + len(failed), max([*failed]))
        last_success = max(succeeded)
        later = sorted(t for t in failed if t > last_success)
        return Backoff(len(later), later[-1] if later else None)

    def remaining(self, now: datetime, base: float, cap: float) -> float:
        """Seconds before a failed pod may be replaced (kube's
        ``getRemainingTimeForFailuresCount``: base, doubled per further failure, capped)."""
        if self.failures == 0 or self.last_failure is None:
            return 0.0
        delay = base
        for _ in range(1, self.failures):
            delay *= 2
            if delay >= cap:
                delay = cap
                break
        elapsed = (now - self.last_failure).total_seconds()
        return max(0.0, delay - elapsed)


def utcnow() -> datetime:
    return datetime.now(UTC)
