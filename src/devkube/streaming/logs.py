"""What a client asked of a container's log: the same options reach pods/<name>/log on the API
server and /containerLogs on the kubelet, which only spell the container differently."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LogRequest:
    """The query parameters of GET pods/<name>/log (and of the kubelet's containerLogs)."""

    namespace: str
    pod: str
    container: str | None
    follow: bool
    tail_lines: int | None
    previous: bool
    timestamps: bool = False
    since_seconds: int | None = None
    limit_bytes: int | None = None


LogSource = Callable[[LogRequest], AsyncIterator[bytes]]


class LogUnavailable(Exception):
    """What was asked is not there (`--previous` of a container that never restarted): the
    source raises it before streaming, and the server answers 400 with its words, as the
    kubelet does."""


def truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes")


def _number(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    return int(raw) if raw else None


def log_request(
    query: Mapping[str, str], namespace: str, pod: str, container: str | None
) -> LogRequest:
    """Parsed as kube-apiserver writes them when it proxies `kubectl logs` to a kubelet
    (pkg/registry/core/pod/strategy.go, LogLocation); a bad number raises ValueError."""
    return LogRequest(
        namespace=namespace,
        pod=pod,
        container=container,
        follow=truthy(query.get("follow")),
        tail_lines=_number(query, "tailLines"),
        previous=truthy(query.get("previous")),
        timestamps=truthy(query.get("timestamps")),
        since_seconds=_number(query, "sinceSeconds"),
        limit_bytes=_number(query, "limitBytes"),
    )


async def limited(chunks: AsyncIterator[bytes], limit: int | None) -> AsyncIterator[bytes]:
    """At most `limit` bytes of the log (`kubectl logs --limit-bytes`), then the end."""
    left = limit
    async for chunk in chunks:
        if left is None:
            yield chunk
            continue
        yield chunk[:left]
        left -= min(left, len(chunk))
        if left == 0:
            return
