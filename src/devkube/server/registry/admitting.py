"""The write being admitted, for validating admission that needs more than the object: whether
it is a dry run (ResourceQuota charges nothing then) and where its `Warning` headers go
(PodSecurity's `warn` level). Set by `Objects` around its admission chain."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from devkube.server.schema import structural


@dataclass
class Admitting:
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)


current: ContextVar[Admitting | None] = ContextVar("devkube_admitting", default=None)


@contextmanager
def request(dry_run: bool, fields: structural.FieldValidation | None) -> Iterator[Admitting]:
    """Admission of one write; warnings land in `fields` (the response's headers) when given."""
    state = Admitting(dry_run, fields.warnings if fields is not None else [])
    token = current.set(state)
    try:
        yield state
    finally:
        current.reset(token)


def warn(text: str) -> None:
    state = current.get()
    if state is not None:
        state.warnings.append(text)


def dry_run() -> bool:
    state = current.get()
    return state is not None and state.dry_run
