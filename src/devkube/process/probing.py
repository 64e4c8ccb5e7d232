"""Running one probe against a pod: HTTP and TCP against the pod address, exec inside it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import aiohttp

from devkube.process.probespec import ProbeSpec

# Runs a command in the container and returns its exit code (-1 on timeout).
Exec = Callable[[Sequence[str], float], Awaitable[int]]


async def probe_once(spec: ProbeSpec, pod_ip: str, run: Exec) -> bool:
    """True when the probe passes; any error or timeout is a failure, as for a kubelet."""
    try:
        if spec.kind == "exec":
            return await run(spec.command, spec.timeout) == 0
        host = spec.host or pod_ip
        if spec.kind == "http":
            return await _http(spec, host)
        return await _tcp(host, spec.port, spec.timeout)
    except (OSError, TimeoutError, aiohttp.ClientError):
        return False


async def _http(spec: ProbeSpec, host: str) -> bool:
    scheme = "https" if spec.scheme == "HTTPS" else "http"
    url = f"{scheme}://{host}:{spec.port}{spec.path}"
    timeout = aiohttp.ClientTimeout(total=spec.timeout)
    headers = {"User-Agent": "kube-probe/1.30", **dict(spec.headers)}
    connector = aiohttp.TCPConnector(ssl=False)
    async with (
        aiohttp.ClientSession(timeout=timeout, connector=connector) as session,
        session.get(url, headers=headers, allow_redirects=False) as response,
    ):
        return 200 <= response.status < 400


async def _tcp(host: str, port: int, seconds: float) -> bool:
    async with asyncio.timeout(seconds):
        _, writer = await asyncio.open_connection(host, port)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
