"""The running operator's caches hold slim pods that read exactly as the served ones.

Against the dev cluster over HTTPS: a 4-host TPU slice converges, and every pod in the
operator's informer cache reads (``read_pod``) as the pod the API server serves, while the
fields it never reads (the container spec's image, command and env, volumes) are gone.
"""

from __future__ import annotations

from raycluster_operator.api.labels import POD_TEMPLATE_HASH_ANNOTATION as HASH
from raycluster_operator.planning.pods import read_pod
from tests.harness.operator_world import World, eventually, raycluster, ready, tpu_group


async def test_cached_pods_read_as_served_and_keep_nothing_else(world: World) -> None:
    op = await world.start_operator()
    await world.apply(raycluster("slim", [tpu_group("tpu", replicas=1)]))

    async def converged() -> None:
        pods = await world.pods("slim")
        assert len(pods) == 5 and all(ready(p) for p in pods)

    await eventually(converged)

    async def cache_caught_up() -> None:
        served = {p["metadata"]["name"]: p for p in await world.pods("slim")}
        cache = op.manager.sources.caches.pods
        cached = {key.split("/", 1)[1]: cache.get(key) for key in cache.all_keys()}
        assert set(cached) >= set(served)
        for name, pod in served.items():
            slim = cached[name]
            assert slim is not None
            assert read_pod(slim) == read_pod(pod)
            assert pod["spec"]["containers"][0].get("image")
            assert slim["spec"]["containers"] == [
                {"name": c["name"]} for c in pod["spec"]["containers"]
            ]
            assert "volumes" not in slim["spec"]
            # Of the annotations only the template hash stays (upgrades, the backoff read it).
            assert slim["metadata"]["annotations"] == {HASH: pod["metadata"]["annotations"][HASH]}

    await eventually(cache_caught_up)
