"""Following the one installed ``rayclusters.ray.io`` CRD while the operator runs.

A KubeRay upgrade (or installing ours) replaces the CRD under a running operator. Until the
operator holds the new schema it compares status against the old one and may write on every
pass (docs/design.md §3.7). So the leader watches that single object (a ``fieldSelector`` on
its name, which RBAC authorizes against ``resourceNames``: list and watch on this CRD only)
and hands every version to ``InstalledCrd.use`` at once, then asks for a pass of every
cluster. Without the grant (a namespaced install) it falls back to ``InstalledCrd``'s periodic
read and learning from writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from raycluster_operator.api.crd import NAME
from raycluster_operator.controller.raycluster.crdfit import InstalledCrd
from raycluster_operator.kube import CRDS, Forbidden, Gone, KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)

#: Seconds between attempts after an error (the CRD missing, the server unreachable).
RETRY_SECONDS = 2.0


async def follow_crd(
    client: KubeClient,
    installed: InstalledCrd,
    changed: Callable[[], None],
    *,
    retry: float = RETRY_SECONDS,
) -> None:
    """Run until cancelled, or until RBAC forbids the watch."""
    while True:
        try:
            crd = await client.get(CRDS, None, NAME)
            installed.use(crd)
            version = str(crd["metadata"]["resourceVersion"])
            async for kind, obj in client.watch(
                CRDS, resource_version=version, field_selector=f"metadata.name={NAME}"
            ):
                if kind == "BOOKMARK":
                    continue
                installed.use(obj if kind != "DELETED" else None)
                log.info("CRD %s %s: status compared against it from now on", NAME, kind.lower())
                changed()
        except Forbidden as exc:
            log.info("not watching CRD %s (%s): it is re-read periodically instead", NAME, exc)
            return
        except (Gone, NotFound, KubeError) as exc:
            log.debug("CRD watch: %s; again in %.0f s", exc, retry)
            await asyncio.sleep(retry)
