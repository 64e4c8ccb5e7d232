"""The resourceclaim controller, as kube-controller-manager's applies DRA to pods.

- A pod's `spec.resourceClaims[]` entry that names a `resourceClaimTemplateName` gets its own
  ResourceClaim, made from the template's `spec` (labels and annotations too): generateName
  `<pod>-<claim entry>-` (the base cut to 57 characters, as kube does), a controller owner
  reference to the pod (so garbage collection removes it with the pod) and the annotation
  `resource.kubernetes.io/pod-claim-name`; the pod's `status.resourceClaimStatuses` then
  names it. A claim it made earlier for the same pod and entry is found first and reused, so
  a lost status write never makes two.
- Release: a pod that is gone or has finished (Succeeded, Failed) is removed from the
  `status.reservedFor` of every claim; a claim generated for a finished pod is deleted; a
  claim reserved for nobody any more loses its `status.allocation` (its devices are free).

It acts only through the API, on one ControlLoop, over the shared pods informer and its own
claims and templates informers (docs/design.md §8, "DRA").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from devkube.machinery.client import ApiClient, ApiError, resource_path
from devkube.machinery.control_loop import ControlLoop
from devkube.machinery.index import Index
from devkube.machinery.informer import Informer
from devkube.machinery.pods import POD_CLAIM_NAME_ANNOTATION, TERMINAL_PHASES

log = logging.getLogger(__name__)

RESOURCE = "resource.k8s.io/v1"
#: kube's longest base for the generated name (before the random suffix).
MAX_BASE = 57


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def claim_for(pod: Mapping[str, Any], entry: str, template: Mapping[str, Any]) -> dict[str, Any]:
    """The ResourceClaim kube's controller generates for the pod's claim entry `entry`."""
    meta = _meta(pod)
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    annotations = {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: entry}
    body: dict[str, Any] = {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": f"{meta.get('name')}-{entry}"[:MAX_BASE] + "-",
            "namespace": meta.get("namespace"),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": dict((template.get("spec") or {}).get("spec") or {}),
    }
    if template_meta.get("labels"):
        body["metadata"]["labels"] = dict(template_meta["labels"])
    return body


def _owner_uid(claim: Mapping[str, Any]) -> str | None:
    for ref in _meta(claim).get("ownerReferences") or []:
        if ref.get("kind") == "Pod" and ref.get("controller"):
            return str(ref.get("uid"))
    return None


class ResourceClaimController:
    def __init__(
        self,
        client: ApiClient,
        *,
        pods: Informer,
        claims: Informer,
        templates: Informer,
        every: float = 5.0,
    ) -> None:
        self._client = client
        self.pods, self.claims, self.templates = pods, claims, templates
        self._loop = ControlLoop(
            "devcluster resourceclaims",
            self.sync,
            period=every,
            failure="resourceclaim pass failed",
        )
        # A pass reads the pods that want claims and looks pods up by uid, never the whole
        # pods cache: without claims a pass costs nothing however many pods there are.
        self._wanting = Index(pods, lambda pod: ("wants",) if _wants_claims(pod) else ())
        self._by_uid = Index(pods, lambda pod: (str(_meta(pod).get("uid")),))
        for informer in (pods, claims, templates):
            informer.subscribe(self._loop.changed)

    async def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def sync(self) -> None:
        claims = list(self.claims.cache.values())
        generated: dict[tuple[str, str], str] = {}
        for claim in claims:
            owner = _owner_uid(claim)
            entry = (_meta(claim).get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
            if owner and entry:
                generated[(owner, str(entry))] = str(_meta(claim).get("name"))
        wanting = list(self._wanting.bucket("wants").values())
        writes = [self._resolve(pod, generated) for pod in wanting]
        writes += [self._release(claim) for claim in claims]
        await asyncio.gather(*writes)

    def _pod(self, uid: str) -> Mapping[str, Any] | None:
        return next(iter(self._by_uid.bucket(uid).values()), None)

    def _live(self, uid: str) -> bool:
        """The pod exists and has not finished."""
        pod = self._pod(uid)
        return pod is not None and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES

    async def _resolve(self, pod: Mapping[str, Any], generated: dict[tuple[str, str], str]) -> None:
        meta = _meta(pod)
        uid, namespace = str(meta.get("uid")), str(meta.get("namespace"))
        statuses = {
            str(s.get("name")): s
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        missing: list[dict[str, Any]] = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, template_name = str(entry.get("name")), entry.get("resourceClaimTemplateName")
            if not template_name or name in statuses:
                continue
            claim_name = generated.get((uid, name))
            if claim_name is None:
                template = self.templates.cache.get((namespace, str(template_name)))
                if template is None:
                    log.debug(
                        "%s/%s waits for template %s", namespace, meta.get("name"), template_name
                    )
                    continue
                try:
                    created = await self._client.create(
                        resource_path(RESOURCE, "resourceclaims", namespace),
                        claim_for(pod, name, template),
                    )
                except ApiError as error:
                    log.warning("claim for %s/%s: %s", namespace, meta.get("name"), error)
                    continue
                claim_name = str(created["metadata"]["name"])
                generated[(uid, name)] = claim_name
            missing.append({"name": name, "resourceClaimName": claim_name})
        if not missing:
            return
        path = resource_path("v1", "pods", namespace, str(meta.get("name")), "status")
        try:
            await self._client.patch(
                path,
                {"metadata": {"uid": uid}, "status": {"resourceClaimStatuses": missing}},
                kind="strategic",
            )
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("resourceClaimStatuses of %s: %s", path, error)

    async def _release(self, claim: Mapping[str, Any]) -> None:
        meta = _meta(claim)
        path = resource_path(
            RESOURCE, "resourceclaims", str(meta.get("namespace")), str(meta["name"])
        )
        status = claim.get("status") or {}
        reserved = list(status.get("reservedFor") or [])
        kept = [r for r in reserved if r.get("resource") != "pods" or self._live(str(r.get("uid")))]
        owner = _owner_uid(claim)
        try:
            finished = owner is not None and self._pod(owner) is not None and not self._live(owner)
            if finished and not meta.get("deletionTimestamp"):
                await self._client.delete(path, uid=str(meta.get("uid")))
                return
            if len(kept) == len(reserved) and (kept or not status.get("allocation")):
                return
            patch: dict[str, Any] = {
                "metadata": {"resourceVersion": meta.get("resourceVersion")},
                "status": {"reservedFor": kept or None},
            }
            if not kept:
                patch["status"]["allocation"] = None
            await self._client.patch(f"{path}/status", patch)
        except ApiError as error:
            if error.status not in (404, 409):
                log.warning("releasing %s: %s", path, error)


def _wants_claims(pod: Mapping[str, Any]) -> bool:
    return (
        bool((pod.get("spec") or {}).get("resourceClaims"))
        and not _meta(pod).get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES
    )
