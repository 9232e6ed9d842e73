"""The shared limiter as a named Ray actor: N Ray actors, each with its own client, stay under ONE limit."""

from __future__ import annotations

import time

import pytest

from shp_ray.providers.base import ProviderSpec
from shp_ray.providers.shared_limiter import NAMESPACE, limiter_id
from shp_ray.providers.sim.server import SimServer

pytestmark = pytest.mark.integration


def test_workers_share_one_named_limiter(ray_session):
    ray = ray_session

    @ray.remote(num_cpus=0)
    class Worker:
        async def fire(self, spec: ProviderSpec, n: int, tag: int) -> dict:
            import asyncio

            from shp_ray.providers.base import ChatRequest
            from shp_ray.providers.registry import make_provider

            provider = make_provider(spec, headroom=0.9)  # built INSIDE the actor from the spec alone
            async with provider:
                msgs = lambda i: (("system", "You are the Critic."), ("user", f"Question: w{tag}-{i}\nRound: 1"))  # noqa: E731
                done = await asyncio.gather(
                    *(provider.complete(ChatRequest(spec.model, msgs(i), 32)) for i in range(n))
                )
            return {"ok": len(done), "limiter": provider.limiter_kind, **provider.stats}

    # 600 rpm over a 1 s window = 10 requests/s for the whole endpoint; 3 workers x 10 requests.
    with SimServer(rpm=600, window_s=1.0) as sim:
        spec = ProviderSpec(kind="sim", base_url=sim.base_url, model="sim-1", rpm=600)
        workers = [Worker.remote() for _ in range(3)]
        ray.get([w.fire.remote(spec, 1, 99) for w in workers])  # warm up the actor processes
        sim_before = sim.stats
        t0 = time.monotonic()
        results = ray.get([w.fire.remote(spec, 10, k) for k, w in enumerate(workers)])
        elapsed = time.monotonic() - t0
        stats = sim.stats
    assert all(r["ok"] == 10 and r["limiter"] == "ray" for r in results)
    # shared: ~30 requests at 10/s (>= 2.5 s) with few 429s; three private limiters would send 30/s
    assert elapsed >= 2.4, elapsed
    # A few 429s are delivery jitter (a loaded machine delays some paced requests into the next window: 6 seen
    # at load 20); three private limiters would send all 30 in ~1 s, and the server refuses ~20 of them.
    assert stats["http_429"] - sim_before["http_429"] <= 8
    actor = ray.get_actor(f"shp-limiter-{limiter_id(sim.base_url, '')}", namespace=NAMESPACE)
    # Releases are fire-and-forget messages to the actor: on a loaded machine the last one may still be
    # queued when the calls have returned. in_flight must drain to 0, not be 0 at this instant.
    deadline = time.monotonic() + 15
    snapshot = ray.get(actor.snapshot.remote())
    while snapshot["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.1)
        snapshot = ray.get(actor.snapshot.remote())
    assert snapshot["acquired"] >= 33 and snapshot["in_flight"] == 0
    ray.kill(actor)


def test_actors_on_this_host_read_the_same_clock(ray_session):
    """The limiter actor's reserved start is an absolute time: valid in a worker only on one clock."""
    ray = ray_session
    from shp_ray.providers.shared_limiter import host_clock

    @ray.remote(num_cpus=0)
    def clock_and_time() -> tuple[str, float]:
        return host_clock(), time.monotonic()

    before = time.monotonic()
    clock, theirs = ray.get(clock_and_time.remote())
    assert clock == host_clock() and before <= theirs <= time.monotonic()  # one CLOCK_MONOTONIC
