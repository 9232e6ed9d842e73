"""A request is paid once unless hedging is asked for, shown by events rather than by a loaded machine's timing.

The suite's ``test_unknown_limit_recovers_with_every_retry_after_style[ms]`` once paid a request twice (26 ok
for 25) under CPU load: a reply slowed past the adaptive deadline (3 x the slowest recent reply, 0.25 s at the
soonest) was hedged, and the server answered both. Here the slow reply is not left to chance: a double holds
one request's reply until the test releases it, and releases it only once a duplicate arrived or the hedging
client's last chance to send one (it abandons and retries at ``abandon_floor_s``) is past. A client that
hedges is caught every time; one that does not passes whatever the machine's load, since nothing but its
``timeout_s`` ends its attempt.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import threading

import pytest
from aiohttp import web

from shp_ray.providers.app_thread import AppThread
from shp_ray.providers.base import ChatRequest, ProviderSpec
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.deadline import DeadlinePolicy
from shp_ray.providers.retry_policy import Backoff

pytestmark = pytest.mark.integration
HELD = "held"  # the question whose first arrival is held
FAST = 20  # replies seen before it: more than a hedging client's min_samples, so its deadline applies
CHANCE_S = DeadlinePolicy().abandon_floor_s + 1.0  # by then a hedging client has hedged or abandoned


class HoldOne:
    """Answers at once, except the first arrival of the ``HELD`` question: held until ``release`` is set."""

    def __init__(self) -> None:
        self.arrived = threading.Event()  # the held request is in
        self.duplicate = threading.Event()  # ... and a second copy of it came
        self.release = threading.Event()
        self.arrivals: collections.Counter[str] = collections.Counter()
        self.paid: collections.Counter[str] = collections.Counter()  # 200s sent, per question
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.chat)

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        question = body["messages"][-1]["content"]
        self.arrivals[question] += 1
        if question == HELD and self.arrivals[question] == 1:
            self.arrived.set()
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait)
        elif question == HELD:
            self.duplicate.set()
        self.paid[question] += 1
        text = "reply " + hashlib.sha256(question.encode()).hexdigest()[:8]
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return web.Response(text=json.dumps({"model": "m", "choices": [choice], "usage": usage}))


def _ask(question: str) -> ChatRequest:
    return ChatRequest("m", (("user", question),), 8)


async def _run(client: OpenAICompatProvider, double: HoldOne) -> str:
    async with client:
        await asyncio.gather(*(client.complete(_ask(f"q{i}")) for i in range(FAST)))
        while client.deadline is not None and client.deadline.current() is None:  # a hedging client watches first
            await asyncio.sleep(0.05)
        held = asyncio.ensure_future(client.complete(_ask(HELD)))
        try:
            await asyncio.to_thread(double.arrived.wait, 30.0)
            await asyncio.to_thread(double.duplicate.wait, CHANCE_S)
        finally:
            double.release.set()
        return (await held).content


def _scenario(**spec: object) -> tuple[HoldOne, OpenAICompatProvider]:
    double = HoldOne()
    host = AppThread(double.app, name="shp-test-hold-one").start()
    try:
        url = f"http://127.0.0.1:{host.port}/v1"
        client = OpenAICompatProvider(
            ProviderSpec(kind="openai", base_url=url, model="m", **spec),  # type: ignore[arg-type]
            backoff=Backoff(base_s=0.01, cap_s=0.1),
            use_ray=False,
        )
        assert asyncio.run(_run(client, double)).startswith("reply ")
    finally:
        double.release.set()
        host.stop()
    return double, client


def test_a_held_reply_is_paid_once_when_no_hedging_is_asked_for():
    double, client = _scenario()
    assert double.arrivals[HELD] == 1 and double.paid[HELD] == 1
    assert not double.duplicate.is_set() and client.stats.get("hedges", 0) == 0
    assert sum(double.paid.values()) == FAST + 1


def test_with_hedging_asked_for_the_held_reply_is_hedged():
    # the control: the double catches a hedge, so the test above would catch one sent by default
    double, client = _scenario(hedge=True)
    assert double.duplicate.is_set() and double.arrivals[HELD] >= 2
    assert client.stats["hedges"] + client.stats.get("abandoned", 0) >= 1
