"""Kubernetes' two timestamp formats: ``Time`` (whole seconds) and ``MicroTime`` (Leases,
events.k8s.io Events), both RFC 3339 in UTC with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """``metav1.Time``: naive datetimes are taken as UTC."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``, as Leases and events.k8s.io Events carry it."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Either format back to an aware datetime; raises ``ValueError`` for anything else."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def now_rfc3339() -> str:
    """The current time as ``metav1.Time``: for the dev cluster's controllers, which own a clock."""
    return rfc3339(datetime.now(UTC))
