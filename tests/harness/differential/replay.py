"""Replays the corpus against one running DevCluster and reduces each answer to an Outcome.

Requests go out as raw HTTPS (aiohttp), not through a client library: the corpus compares
what the servers say, so nothing between may default, retry or reword. The areas run
concurrently (each in order, in its own namespace), so the waits of the controller-driven
steps (Jobs, quota, disruption budgets) overlap.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import yaml

from devkube import DevCluster
from devkube.machinery.client import ssl_context
from raycluster_operator.controller.crds import crd_manifest

from . import paths
from .corpus import CONTENT_TYPES, Area, Step
from .normalise import Normaliser

#: Bodies a step may name instead of writing them out.
NAMED_BODIES = {"raycluster-crd": crd_manifest}
_SUBSTITUTION = re.compile(r"\{(ns|saved\.[\w.-]+)\}")
_WARNING = re.compile(r'^\d{3} \S+ "(.*)"$')
POLL = 0.25


@dataclass
class Outcome:
    """What is compared of one answer."""

    code: int
    reason: str = ""
    message: str = ""
    warnings: list[str] = field(default_factory=list)
    body: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "reason": self.reason,
            "message": self.message,
            "warnings": self.warnings,
            "body": self.body,
        }


@dataclass
class _Answer:
    code: int
    body: Any
    warnings: list[str]


class Replay:
    """One cluster's replay: its sessions (one per identity) and what it learnt."""

    def __init__(self, cluster: DevCluster) -> None:
        self.cluster = cluster
        self.normaliser = Normaliser()
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._ssl = ssl_context(cluster.ca_pem)
        #: Seconds each area took (the slowest bounds the whole replay).
        self.took: dict[str, float] = {}

    async def close(self) -> None:
        for session in self._sessions.values():
            await session.close()

    async def _session(self, namespace: str, identity: str) -> aiohttp.ClientSession:
        key = f"{namespace}/{identity}"
        if key not in self._sessions:
            token = (
                await self.cluster.service_account_token(namespace, identity)
                if identity
                else self.cluster.token
            )
            self._sessions[key] = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
                connector=aiohttp.TCPConnector(ssl=self._ssl),
            )
        return self._sessions[key]

    async def run(self, areas: list[Area]) -> dict[str, Outcome]:
        """Every step's outcome, normalised once all answers are in: a name generated early
        is recognised by a generateName that only a later answer shows."""
        results = await asyncio.gather(*(self._area(a) for a in areas))
        answers = {k: v for r in results for k, v in r.items()}
        for answer in answers.values():
            self.normaliser.learn(answer.body)
        steps = {s.id: (s, a.managed_fields) for a in areas for s in a.steps}
        return {k: self._outcome(steps[k][0], v, steps[k][1]) for k, v in answers.items()}

    async def _area(self, area: Area) -> dict[str, _Answer]:
        started = time.monotonic()
        await self._namespace(area)
        saved: dict[str, Any] = {"ns": area.namespace}
        out: dict[str, _Answer] = {}
        for step in area.steps:
            begun = time.monotonic()
            out[step.id] = await self._step(area, step, saved)
            self.took[step.id] = time.monotonic() - begun
        self.took[area.name] = time.monotonic() - started
        return out

    async def _namespace(self, area: Area) -> None:
        """The area's namespace, once its `default` ServiceAccount exists (Kubernetes'
        serviceaccount controller makes it a moment after the namespace; pods wait for it)."""
        session = await self._session("", "")
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": area.namespace, "labels": area.namespace_labels},
        }
        answer = await self._send(session, "POST", "/api/v1/namespaces", body, "json", {})
        if answer.code >= 300:
            raise RuntimeError(f"namespace {area.namespace}: {answer.body}")
        path = f"/api/v1/namespaces/{area.namespace}/serviceaccounts/default"
        deadline = time.monotonic() + 60
        while (await self._send(session, "GET", path, None, "json", {})).code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no default ServiceAccount in {area.namespace}")
            await asyncio.sleep(POLL)

    async def _step(self, area: Area, step: Step, saved: dict[str, Any]) -> _Answer:
        path = _substitute(step.path, saved)
        params = {k: _substitute(v, saved) for k, v in step.params.items()}
        body = step.body
        if isinstance(body, str) and body in NAMED_BODIES:
            body = NAMED_BODIES[body]()
        body = _substitute(body, saved)
        session = await self._session(area.namespace, step.identity)
        if step.method == "WATCH":
            answer = await self._watch(session, path, params, step.events)
        else:
            answer = await self._send(session, step.method, path, body, step.type, params)
            deadline = time.monotonic() + step.within
            while step.until and not _holds(answer.body, step.until):
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(POLL)
                answer = await self._send(session, step.method, path, body, step.type, params)
        for key, where in step.save.items():
            saved[f"saved.{key}"] = paths.get(answer.body, where)
        return answer

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        path: str,
        body: Any,
        kind: str,
        params: dict[str, str],
    ) -> _Answer:
        data: bytes | None = None
        headers: dict[str, str] = {}
        if body is not None:
            if isinstance(body, str):  # written out: duplicate keys and the like, sent as is
                data = body.encode()
            elif kind == "apply":
                data = yaml.safe_dump(body).encode()
            else:
                data = json.dumps(body).encode()
            headers["Content-Type"] = CONTENT_TYPES[kind]
        async with session.request(
            method,
            self.cluster.url + path,
            params=params,
            data=data,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as response:
            raw = await response.read()
            warnings = [_warning(w) for w in response.headers.getall("Warning", [])]
        try:
            decoded: Any = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw.decode(errors="replace")
        return _Answer(response.status, decoded, warnings)

    async def _watch(
        self, session: aiohttp.ClientSession, path: str, params: dict[str, str], events: int
    ) -> _Answer:
        """A watch's events (BOOKMARKs left out): `events` of them, or all until the server
        ends the watch (`timeoutSeconds`, 2 unless the step says)."""
        query = {"watch": "true", "timeoutSeconds": "2", **params}
        seen: list[Any] = []
        async with session.get(
            self.cluster.url + path,
            params=query,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as response:
            if response.status >= 300:
                raw = await response.read()
                return _Answer(response.status, json.loads(raw) if raw else None, [])
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "BOOKMARK":
                    continue
                seen.append(event)
                if events and len(seen) >= events:
                    break
            return _Answer(response.status, {"events": seen}, [])

    def _outcome(self, step: Step, answer: _Answer, managed_fields: bool) -> Outcome:
        norm = self.normaliser
        warnings = [norm.text(w) for w in answer.warnings]
        body = answer.body
        if answer.code >= 300 and isinstance(body, dict) and body.get("kind") == "Status":
            return Outcome(
                answer.code,
                reason=str(body.get("reason", "")),
                message=norm.text(str(body.get("message", ""))),
                warnings=warnings,
            )
        if answer.code >= 300:
            return Outcome(answer.code, message=norm.text(str(body)), warnings=warnings)
        body = norm.body(body)
        if not managed_fields:
            _drop_managed_fields(body)
        if step.compare:
            body = {p: _present(paths.get(body, p)) for p in step.compare}
        for where in step.ignore:
            paths.drop(body, where)
        return Outcome(answer.code, warnings=warnings, body=body)


def _drop_managed_fields(value: Any) -> None:
    if isinstance(value, dict):
        meta = value.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        for item in value.values():
            _drop_managed_fields(item)
    elif isinstance(value, list):
        for item in value:
            _drop_managed_fields(item)


def _present(value: Any) -> Any:
    return "<absent>" if value is paths.MISSING else value


def _holds(body: Any, until: dict[str, Any]) -> bool:
    return all(paths.get(body, p) == v for p, v in until.items())


def _warning(header: str) -> str:
    match = _WARNING.match(header.strip())
    return match.group(1).replace('\\"', '"') if match else header


def _substitute(value: Any, saved: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _SUBSTITUTION.fullmatch(value)
        if whole:
            return saved.get(whole.group(1), value)
        return _SUBSTITUTION.sub(lambda m: str(saved.get(m.group(1), m.group(0))), value)
    if isinstance(value, dict):
        return {_substitute(k, saved): _substitute(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, saved) for v in value]
    return value
