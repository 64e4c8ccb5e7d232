"""Kubernetes `Status` failures as a Python exception.

Every client we serve decodes error bodies as `Status` objects and branches on `reason` and
`code` (AlreadyExists, Conflict, Expired...), so errors carry exactly those fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ApiError(Exception):
    """A request failure that becomes a `Status` body with the same HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(kind: str, name: str, group: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    qual = f"{plural}.{group}" if group else plural
    return ApiError(
        404, "NotFound", f'{qual} "{name}" not found', details=_details(plural, name, group)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    qual = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "AlreadyExists",
        f'{qual} "{name}" already exists',
        details=_details(plural, name, group),
    )


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    qual = f"{plural}.{group}" if group else plural
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qual} "{name}": {why}',
        details=_details(plural, name, group),
    )


def invalid(
    kind: str,
    group: str,
    name: str,
    causes: Sequence[tuple[str, str] | tuple[str, str, str]],
) -> ApiError:
    """A 422 worded as kube-apiserver's ``NewInvalid``: ``Kind.group "name" is invalid: ...``,
    several causes in brackets; each cause keeps its reason (FieldValueRequired, ...)."""
    texts = [f"{cause[0]}: {cause[1]}" for cause in causes]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details = _details(kind, name, group)
    details["causes"] = [
        {
            "reason": cause[2] if len(cause) > 2 else "FieldValueInvalid",
            "message": cause[1],
            "field": cause[0],
        }
        for cause in causes
    ]
    qual = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{qual} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)
