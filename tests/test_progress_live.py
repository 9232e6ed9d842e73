"""The progress line counts paid calls while trajectories are still in flight, on real Ray.

A trajectory of the embedded model takes minutes; a line that says "0 paid calls" until the first one ends tells a
user nothing is happening. The driver asks every worker for its counters each second: a worker busy with as many
trajectories as it may run must still answer. Here an endpoint of the test's own holds every request after the
first two (the preflight and round 1's draft) until the test has seen, in the driver's progress, a paid call with
no trajectory done -- then releases them. Nothing waits on timing: without an answer the run stays held and the
test fails at its generous deadline.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web

from shp_ray.generation import progress
from shp_ray.generation.datasets import load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.providers.app_thread import AppThread
from shp_ray.providers.base import ProviderSpec
from storage.parts import Store

pytestmark = pytest.mark.integration
DEADLINE_S = 180.0


class HeldEndpoint:
    """An OpenAI-compatible chat endpoint answering the first ``free`` requests at once and the rest once
    ``release`` is set."""

    def __init__(self, free: int) -> None:
        self.free, self.seen = free, 0
        self.release = threading.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.host = AppThread(app, name="held-endpoint")

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.seen += 1
        if self.seen > self.free:
            while not self.release.is_set():
                await asyncio.sleep(0.05)
        text = "APPROVED" if "critic" in str(body["messages"][0]["content"]).lower() else "A draft answer."
        return web.json_response({
            "id": f"r{self.seen}", "object": "chat.completion", "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
        })  # fmt: skip


def test_paid_calls_show_while_the_only_trajectory_is_in_flight(tmp_path, ray_session, monkeypatch) -> None:
    seen_live = threading.Event()
    update = progress.Progress.update

    def watched(self: progress.Progress, **values: int) -> None:
        update(self, **values)
        if self.state.done == 0 and self.state.paid_calls >= 1:
            seen_live.set()

    monkeypatch.setattr(progress.Progress, "update", watched)
    endpoint = HeldEndpoint(free=2)
    endpoint.host.start()
    in_time: list[bool] = []  # whether the line said so before the endpoint let the trajectory finish

    def release() -> None:
        in_time.append(seen_live.wait(DEADLINE_S))
        endpoint.release.set()

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    try:
        cfg = GenerationConfig(max_rounds=2, embedder="fake-hash", judge="none", workers=1, concurrency=1)
        spec = ProviderSpec(kind="sim", base_url=f"http://127.0.0.1:{endpoint.host.port}/v1", model="m")
        summary = generate(load_scenarios("shp_paper", limit=1), cfg, Store(tmp_path / "store"), spec,
                           RunOptions(progress=False))  # fmt: skip
    finally:
        endpoint.release.set()
        endpoint.host.stop()
    releaser.join(DEADLINE_S)
    assert summary.generated == 1 and summary.paid_calls >= 2
    assert in_time == [True], "the progress never counted a paid call while the trajectory was in flight"
