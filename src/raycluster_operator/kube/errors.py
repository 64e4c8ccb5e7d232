"""The few API failures the controller tells apart, independent of the client library.

The controller decides what to do from the kind of failure (ignore a NotFound on delete,
re-list on Gone, wait on TooManyRequests, back off on ServerError, wait for the next change on
a ``terminal`` one), so the adapter maps every
HTTP status to one of these and nothing above `kube` sees an httpx or lightkube exception.
"""

from __future__ import annotations

import contextlib


class KubeError(Exception):
    """An API call failed; ``code`` is the HTTP status (0 when no answer arrived)."""

    #: Retrying the same request cannot succeed until something else changes (the object,
    #: RBAC, an admission policy): the controller waits for a change instead of backing off.
    terminal = False

    def __init__(self, message: str, *, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """A precondition or resourceVersion did not match (HTTP 409, not AlreadyExists)."""


class AlreadyExists(Conflict):
    pass


class Gone(KubeError):
    """The resourceVersion asked for is too old: the caller must list again (HTTP 410)."""


class TooManyRequests(KubeError):
    def __init__(self, message: str, *, retry_after: float = 1.0, code: int = 429) -> None:
        super().__init__(message, code=code, reason="TooManyRequests")
        self.retry_after = retry_after


class ServerError(KubeError):
    """5xx answers and transport failures: worth retrying later."""


class Invalid(KubeError):
    """The server rejected the object (HTTP 400/422); retrying the same write will not help."""

    terminal = True


class Forbidden(KubeError):
    """HTTP 401/403: RBAC or credentials are wrong (or a quota is spent)."""

    terminal = True


def error_for(code: int, body: object, *, retry_after_header: str | None = None) -> KubeError:
    """Turn an HTTP error answer (a Status object when the server is Kubernetes) into our type."""
    message = f"HTTP {code}"
    reason = ""
    retry_after: float | None = None
    if isinstance(body, dict):
        message = str(body.get("message") or message)
        reason = str(body.get("reason") or "")
        details = body.get("details")
        if isinstance(details, dict) and isinstance(details.get("retryAfterSeconds"), int | float):
            retry_after = float(details["retryAfterSeconds"])
    if retry_after_header:
        with contextlib.suppress(ValueError):
            retry_after = float(retry_after_header)
    if code == 404:
        return NotFound(message, code=code, reason=reason)
    if code == 409:
        if reason == "AlreadyExists":
            return AlreadyExists(message, code=code, reason=reason)
        return Conflict(message, code=code, reason=reason)
    if code == 410:
        return Gone(message, code=code, reason=reason)
    if code == 429:
        return TooManyRequests(message, retry_after=retry_after if retry_after is not None else 1.0)
    if code in (401, 403):
        return Forbidden(message, code=code, reason=reason)
    if code in (400, 422):
        return Invalid(message, code=code, reason=reason)
    if code >= 500:
        return ServerError(message, code=code, reason=reason)
    return KubeError(message, code=code, reason=reason)
