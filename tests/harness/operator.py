"""The operator attached to a dev cluster: its `Manager` exactly as ``raycluster-operator run``
builds it, minus the HTTP endpoints and leader election unless a test asks for them, acting
through whatever kubeconfig the world gives it (normally its ServiceAccount with deploy/'s
RBAC, so RBAC is enforced as in production)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raycluster_operator.controller.manager import Manager, ManagerOptions
from raycluster_operator.controller.runtime.leader import LeaseTiming
from raycluster_operator.kube import KubeClient

from .waiting import eventually

FAST_LEASE = LeaseTiming(lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)
#: No ports, one replica: nothing to collide on between tests.
QUIET = dict(metrics_addr=None, health_addr=None, leader_elect=False)
#: What the in-process worlds (operator, hardening) share: a fast lease, short retries.
FAST: dict[str, object] = dict(lease_timing=FAST_LEASE, watch_timeout=30, retry_base_delay=0.02)


def operator_options(**flat: Any) -> ManagerOptions:
    """`ManagerOptions` from flat names (``resync_period=5``), the quiet ones first."""
    return ManagerOptions.from_flat(**{**QUIET, **flat})


@dataclass
class RunningOperator:
    manager: Manager
    client: KubeClient
    task: asyncio.Task[None]

    @property
    def writes(self) -> int:
        return self.client.writes

    async def synced(self, within: float, *, interval: float = 0.05) -> None:
        """Wait until every informer has listed; an operator that exits fails at once."""

        def check() -> None:
            if self.task.done():
                self.task.result()
                raise RuntimeError("the operator exited before its caches synced")
            assert self.manager.synced()

        await eventually(check, within, interval=interval)

    async def stop(self, *, hang_ok: bool = False) -> None:
        """As SIGTERM does: drain, release, then close the client (an operator that does not
        stop within 15 s fails the test, unless ``hang_ok``)."""
        self.manager.stop()
        try:
            await asyncio.wait_for(self.task, 15)
        except asyncio.CancelledError:
            pass
        except TimeoutError:
            if not hang_ok:
                raise
        await self.client.close()

    async def crash(self) -> None:
        """Cancel at once: in-flight writes are abandoned, nothing is drained or released."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()


def launch_operator(kubeconfig: Mapping[str, Any], options: ManagerOptions) -> RunningOperator:
    """Start the operator as a task (not yet synced: see `RunningOperator.synced`)."""
    client = KubeClient.from_kubeconfig(dict(kubeconfig))
    manager = Manager(client, options)
    return RunningOperator(manager, client, asyncio.create_task(manager.run(), name="operator"))
