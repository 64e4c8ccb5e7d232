"""The informer loop against a scripted API: resume, bookmarks, 410, reconnect."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from raycluster_operator.controller.runtime.informer import Informer
from raycluster_operator.kube import PODS, Gone, ListResult, ServerError


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class ScriptedApi:
    """list() answers from ``listings``; each watch() plays the next script (a list of events
    or an exception to raise), then blocks when the scripts run out."""

    def __init__(self, listings: list[ListResult], watches: list[Any]) -> None:
        self.listings = listings
        self.watches = watches
        self.watch_versions: list[str] = []
        self.lists = 0

    async def list(self, kind: Any, namespace: Any, **_: Any) -> ListResult:
        self.lists += 1
        return self.listings.pop(0)

    async def watch(
        self, kind: Any, namespace: Any, *, resource_version: str, **_: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.watch_versions.append(resource_version)
        if not self.watches:
            await asyncio.Event().wait()
        script = self.watches.pop(0)
        if isinstance(script, Exception):
            raise script
        for event in script:
            yield event


async def run_until(informer: Informer, api: ScriptedApi, done: Any) -> None:
    task = asyncio.create_task(informer.run())
    try:
        for _ in range(500):
            if done():
                return
            await asyncio.sleep(0.005)
        raise AssertionError("condition not reached")
    finally:
        task.cancel()


async def test_watch_resumes_from_the_last_version_and_bookmarks_advance_it() -> None:
    api = ScriptedApi(
        [ListResult([pod("a", "5")], "10")],
        [
            [("ADDED", pod("b", "11")), ("BOOKMARK", {"metadata": {"resourceVersion": "20"}})],
            [("MODIFIED", pod("a", "21"))],
        ],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(api, PODS, backoff_base=0.001)  # type: ignore[arg-type]
    informer.add_handler(lambda t, o, n: seen.append((t, (n or o or {})["metadata"]["name"])))
    await run_until(informer, api, lambda: len(api.watch_versions) >= 3)
    assert api.watch_versions[:3] == ["10", "20", "21"]
    assert api.lists == 1
    assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]
    assert informer.store.get("ns/a") == pod("a", "21")


async def test_gone_triggers_a_relist_whose_diff_reaches_the_handlers() -> None:
    api = ScriptedApi(
        [ListResult([pod("a", "5"), pod("b", "6")], "10"), ListResult([pod("b", "30")], "31")],
        [Gone("too old", code=410)],
    )
    seen: list[tuple[str, str]] = []
    informer = Informer(api, PODS, backoff_base=0.001)  # type: ignore[arg-type]
    informer.add_handler(lambda t, o, n: seen.append((t, (n or o or {})["metadata"]["name"])))
    await run_until(informer, api, lambda: len(api.watch_versions) >= 2)
    assert api.lists == 2
    assert api.watch_versions[1] == "31"
    assert ("DELETED", "a") in seen and ("MODIFIED", "b") in seen
    assert informer.store.keys() == ["ns/b"]


async def test_errors_back_off_and_reconnect_without_relisting() -> None:
    api = ScriptedApi(
        [ListResult([], "10")],
        [ServerError("boom"), ServerError("boom"), [("ADDED", pod("a", "11"))]],
    )
    informer = Informer(api, PODS, backoff_base=0.001)  # type: ignore[arg-type]
    await run_until(informer, api, lambda: "ns/a" in informer.store)
    assert api.lists == 1
    assert api.watch_versions[:3] == ["10", "10", "10"]


async def test_deleted_event_removes_from_cache_and_index() -> None:
    from raycluster_operator.controller.runtime.store import by_label

    labelled = pod("a", "11")
    labelled["metadata"]["labels"] = {"ray.io/cluster": "c"}
    api = ScriptedApi([ListResult([labelled], "11")], [[("DELETED", labelled)]])
    informer = Informer(
        api,  # type: ignore[arg-type]
        PODS,
        indexers={"cluster": by_label("ray.io/cluster")},
    )
    await run_until(informer, api, lambda: len(api.watch_versions) >= 2)
    assert informer.store.by_index("cluster", "ns/c") == []
