"""Run-time switchable fault injection, driven by one seeded random generator.

Tests flip faults on a live server (in process through `Faults`, out of process through the
`/devcluster/faults` endpoint) to prove clients retry, back off and resume watches.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from devkube.server.errors import ApiError

_REASONS = {
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class FaultRule:
    """Fail `rate` of matching requests with `code`; "*" matches any verb or resource."""

    verb: str = "*"
    resource: str = "*"
    rate: float = 1.0
    code: int = 500
    retry_after: int | None = None
    latency: float = 0.0

    def matches(self, verb: str, resource: str) -> bool:
        return self.verb in ("*", verb) and self.resource in ("*", resource)


@dataclass
class Faults:
    """The fault switchboard. Verbs are Kubernetes verbs (get, list, watch, create, update,
    patch, delete, deletecollection); resources are plurals, optionally `plural/subresource`."""

    seed: int = 0
    rules: list[FaultRule] = field(default_factory=list)
    latency: float = 0.0
    drop_watches_every: float | None = None
    # Drops end streams cleanly (as a server timeout does) instead of breaking the connection.
    drop_gracefully: bool = False
    rng: random.Random = field(init=False, repr=False)
    _drop_listeners: list[Callable[[bool], int]] = field(
        default_factory=list, init=False, repr=False
    )
    _expire_listeners: list[Callable[[], None]] = field(
        default_factory=list, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def add(self, rule: FaultRule) -> FaultRule:
        self.rules.append(rule)
        return rule

    def fail(
        self,
        verb: str = "*",
        resource: str = "*",
        *,
        rate: float = 1.0,
        code: int = 500,
        retry_after: int | None = None,
    ) -> FaultRule:
        return self.add(FaultRule(verb, resource, rate, code, retry_after))

    def slow(self, verb: str = "*", resource: str = "*", *, seconds: float) -> FaultRule:
        return self.add(FaultRule(verb, resource, 0.0, 500, None, seconds))

    def clear(self) -> None:
        self.rules.clear()
        self.latency = 0.0
        self.drop_watches_every = None
        self.drop_gracefully = False

    def decide(self, verb: str, resource: str) -> tuple[float, ApiError | None]:
        """The latency to add and the error to answer (if any) for one request."""
        delay = self.latency
        for rule in self.rules:
            if not rule.matches(verb, resource):
                continue
            delay += rule.latency
            if rule.rate > 0 and self.rng.random() < rule.rate:
                headers = {}
                retry_after = rule.retry_after
                if rule.code == 429 and retry_after is None:
                    retry_after = 1
                if retry_after is not None:
                    headers["Retry-After"] = str(retry_after)
                reason = _REASONS.get(rule.code, "InternalError")
                error = ApiError(
                    rule.code,
                    reason,
                    f"injected fault: {reason} for {verb} {resource}",
                    details={"retryAfterSeconds": retry_after} if retry_after is not None else None,
                    headers=headers,
                )
                return delay, error
        return delay, None

    def on_drop(self, listener: Callable[[bool], int]) -> None:
        self._drop_listeners.append(listener)

    def on_expire(self, listener: Callable[[], None]) -> None:
        self._expire_listeners.append(listener)

    def expire_watch_history(self) -> None:
        """Forget all retained watch history: every resume from before now gets 410."""
        for listener in self._expire_listeners:
            listener()

    def drop_watches(self, graceful: bool | None = None) -> int:
        """Cut every open watch stream now; returns how many were cut."""
        clean = self.drop_gracefully if graceful is None else graceful
        return sum(listener(clean) for listener in self._drop_listeners)

    # JSON form for the HTTP endpoint -----------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "latency": self.latency,
            "dropWatchesEvery": self.drop_watches_every,
            "dropGracefully": self.drop_gracefully,
            "rules": [asdict(rule) for rule in self.rules],
        }

    def load_json(self, doc: dict[str, Any]) -> None:
        """Replace the configuration; `expireHistoryNow: true` forgets watch history and
        `dropWatchesNow: true` cuts watches immediately (in that order)."""
        if "seed" in doc and doc["seed"] != self.seed:
            self.seed = int(doc["seed"])
            self.rng = random.Random(self.seed)
        self.latency = float(doc.get("latency", 0.0))
        every = doc.get("dropWatchesEvery")
        self.drop_watches_every = None if every is None else float(every)
        self.drop_gracefully = bool(doc.get("dropGracefully", False))
        rules = []
        for raw in doc.get("rules") or []:
            retry = raw.get("retry_after", raw.get("retryAfter"))
            rules.append(
                FaultRule(
                    verb=str(raw.get("verb", "*")),
                    resource=str(raw.get("resource", "*")),
                    rate=float(raw.get("rate", 1.0)),
                    code=int(raw.get("code", 500)),
                    retry_after=None if retry is None else int(retry),
                    latency=float(raw.get("latency", 0.0)),
                )
            )
        self.rules = rules
        if doc.get("expireHistoryNow"):
            self.expire_watch_history()
        if doc.get("dropWatchesNow"):
            self.drop_watches()
