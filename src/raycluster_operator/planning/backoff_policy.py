"""The crash-loop backoff's figures (docs/design.md §4 rule 13a): apart from its records and
rules in ``planning/features/backoff.py`` because they are a planning option
(``PlanOptions``) too."""

from __future__ import annotations

from dataclasses import dataclass

#: Beyond this many doublings the delay is ``max`` anyway; keeps ``2 ** n`` a small number.
_MAX_DOUBLINGS = 62


@dataclass(frozen=True)
class BackoffPolicy:
    """Seconds: the first delay, its cap, and how long a slice stays ready to be forgiven."""

    base: float = 10.0
    max: float = 300.0
    reset: float = 600.0

    def delay(self, failures: int) -> float:
        """The wait before re-creating a slice that broke ``failures`` times in a row: none
        for the first break (replaced at once, as always), then base, 2 base, ... up to max."""
        if failures <= 1 or self.base <= 0:
            return 0.0
        return min(self.base * 2.0 ** min(failures - 2, _MAX_DOUBLINGS), self.max)


#: 10 s doubling to 5 min, forgiven after 10 min ready (issue #14's figures).
DEFAULT_POLICY = BackoffPolicy()
