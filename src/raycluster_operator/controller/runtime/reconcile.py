"""What a kind gives the generic controller, and what a pass may answer (docs/design.md §7).

A kind is plugged in as a ``Registration``: its informers, the keys of everything it
reconciles (a resync enqueues them all), how its changes become keys, and a leadership term
that hands out the ``Reconciler`` for that term (a fresh one, when the kind keeps per-term
records such as expectations). Every kind speaks one retry vocabulary, so the runtime's
policy is the same for all of them:

- a ``Result``: done, or look again after ``requeue_after`` seconds;
- ``TerminalError``: refused for good; retrying the same pass cannot help, so the key waits
  for its next change (or a resync);
- any other exception: retried with per-key backoff, ``ReconcileError`` and the API's own
  errors without a traceback, anything else (a bug) with one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from raycluster_operator.controller.runtime.informer import Informer


@dataclass(frozen=True)
class Result:
    """When to look at the key again without a change (None: only on a change)."""

    requeue_after: float | None = None


class ReconcileError(Exception):
    """The pass failed in a way the kind explained (failed writes): retried with backoff,
    logged without a traceback."""


class TerminalError(ReconcileError):
    """Refused for good (Invalid, Forbidden): retrying the same pass cannot help, so the key
    waits for the next change (or resync) instead of backing off."""


class Reconciler(Protocol):
    """One pass over one key: read the caches, decide, write."""

    async def reconcile(self, key: str) -> Result: ...


R_co = TypeVar("R_co", bound=Reconciler, covariant=True)


class Registration(Protocol[R_co]):
    """A kind, as the generic ``Controller`` runs it."""

    #: The kind's name in logs, task names and metric prefixes.
    @property
    def name(self) -> str: ...

    #: The informers whose caches the kind reads; the manager starts them.
    @property
    def informers(self) -> Sequence[Informer]: ...

    def route(self, enqueue: Callable[[str], None]) -> None:
        """Hand every change the kind's sources see to ``enqueue``, as the key it concerns."""

    def all_keys(self) -> Sequence[str]:
        """Every key the caches hold: what a resync (and the start of a term) enqueues."""

    async def wait_synced(self) -> None:
        """Return once the caches are worth planning from."""

    def term(self, resync: Callable[[], None]) -> AbstractAsyncContextManager[R_co]:
        """One leadership term: the reconciler for it, and whatever the kind runs beside its
        workers (stopped on exit). ``resync`` enqueues every key again."""
