"""The live view's loop (`dev --watch`): follow every pod of the dev cluster and redraw
(live_view.py) on each burst of changes; on a terminal in place, otherwise appended.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raycluster_operator.api.objects import Pod, Resource
from raycluster_operator.devcluster import live_view
from raycluster_operator.devcluster.live_view import RayColumn, ray_state

if TYPE_CHECKING:
    from devkube import DevCluster

Pods = dict[tuple[str, str], dict[str, Any]]


def ray_column(cluster: DevCluster) -> RayColumn | None:
    """A RAY column when pods really run here (a runtime that keeps their output)."""
    read_log = getattr(cluster.kubelet.runtime, "read_log", None)
    if read_log is None:
        return None

    def column(body: Mapping[str, Any], phase: str) -> str:
        pod = Pod(body)
        if pod.labels.get("ray.io/is-ray-node") != "yes":
            return ""
        log = read_log(pod.namespace or "default", pod.name)
        state = ray_state(log, phase)
        ip = pod.pod_ip
        # The pod's Ray node: every node announces its pod IP (--node-ip-address).
        return f"node at {ip}" if state == "up" and ip else state

    return column


async def _follow(cluster: DevCluster, pods: Pods, changed: asyncio.Event) -> None:
    """Keeps ``pods`` equal to the cluster's pods; sets ``changed`` on every event."""
    async for event in cluster.client.list_and_watch("/api/v1/pods"):
        if event.type == "SYNC":
            pods.clear()
            items = event.object.get("items") or []
        else:
            items = [event.object]
        for pod in items:
            view = Resource(pod)
            key = (str(view.namespace), view.name)
            if event.type == "DELETED":
                pods.pop(key, None)
            else:
                pods[key] = pod
        changed.set()


async def next_change(changed: asyncio.Event, within: float | None) -> None:
    """Until ``changed`` is set or ``within`` seconds pass. ``asyncio.timeout``, not
    ``wait_for``: on Python 3.11, a cancel that comes in the same loop turn as the event
    makes ``wait_for`` return instead of raising, and the live view never ended on Ctrl-C."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            await changed.wait()


async def watch_pods(cluster: DevCluster, kubeconfig: str) -> None:
    """The live view: redrawn in place on a terminal, appended otherwise."""
    from rich.console import Console
    from rich.live import Live

    pods: Pods = {}
    ray = ray_column(cluster)
    shown: list[live_view.HostRow] | None = None
    changed = asyncio.Event()
    tty = sys.stdout.isatty()
    console = Console() if tty else Console(width=200, no_color=True)
    live = Live(console=console, auto_refresh=False, screen=False) if tty else None
    follower = asyncio.create_task(_follow(cluster, pods, changed))
    if live is not None:
        live.start()
    try:
        while True:
            # Ray comes up without any pod changing: with a RAY column, look again each second.
            await next_change(changed, 1.0 if ray else None)
            await asyncio.sleep(0.2)  # one table per burst of changes
            changed.clear()
            rows = live_view.host_rows(pods.values(), ray)
            if rows == shown:
                continue
            shown = rows
            footer = live_view.next_commands(kubeconfig, rows, real=ray is not None)
            view = live_view.render(rows, footer, ray=ray is not None)
            if live is not None:
                live.update(view, refresh=True)
            else:
                console.print(view)
                console.print()
                sys.stdout.flush()
    finally:
        if live is not None:
            live.stop()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
