"""The cluster's cache path without a cluster: gets and puts of one event-loop tick travel in one
call to the cache actor, each caller gets its own answer, an error reaches every caller of its batch,
and CachedChat / JudgeService use an async cache exactly as they use the SQLite file."""

from __future__ import annotations

import asyncio

import pytest

from shp_ray.generation.cache_actor import RemoteKV, _TickBatch
from shp_ray.generation.services import CachedChat
from shp_ray.providers.base import ChatRequest, Completion, Usage


class _Ref:
    """What ``actor.method.remote(...)`` returns: awaitable."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __await__(self):
        yield from asyncio.sleep(0).__await__()
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value


class _Method:
    def __init__(self, fn) -> None:
        self.fn = fn

    def remote(self, *args):
        return _Ref(self.fn(*args))


class FakeCacheActor:
    """A CacheActor in this process: a dict per table, counting its calls."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, dict]] = {"responses": {}, "judgments": {}}
        self.calls: list[tuple[str, int]] = []
        self.get_many = _Method(self._get_many)
        self.put_many = _Method(self._put_many)

    def _get_many(self, table: str, keys: list[str]) -> list[dict | None]:
        self.calls.append(("get", len(keys)))
        return [self.tables[table].get(k) for k in keys]

    def _put_many(self, table: str, items: list[tuple[str, dict]]) -> None:
        self.calls.append(("put", len(items)))
        for k, rec in items:
            self.tables[table].setdefault(k, rec)  # the first record wins, as INSERT OR IGNORE


def test_one_tick_of_gets_and_puts_is_one_call_each() -> None:
    actor = FakeCacheActor()
    kv = RemoteKV(actor, "responses")

    async def main() -> list:
        await asyncio.gather(*(kv.aput(f"k{i}", {"v": i}) for i in range(50)))
        return await asyncio.gather(*(kv.aget(f"k{i}") for i in range(60)))

    got = asyncio.run(main())
    assert got == [{"v": i} for i in range(50)] + [None] * 10
    assert actor.calls == [("put", 50), ("get", 60)]


def test_an_error_reaches_every_caller_of_its_batch_and_the_next_batch_works() -> None:
    sent: list[list[int]] = []

    async def send(items: list[int]) -> list[int]:
        sent.append(items)
        if len(sent) == 1:
            raise ConnectionError("the cache actor is gone")
        return [i * 2 for i in items]

    batch = _TickBatch(send)

    async def main() -> tuple[list, list]:
        first = await asyncio.gather(*(batch(i) for i in range(3)), return_exceptions=True)
        return first, await asyncio.gather(*(batch(i) for i in range(3)))

    first, second = asyncio.run(main())
    assert all(isinstance(e, ConnectionError) for e in first) and second == [0, 2, 4]


class _Provider:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        return Completion(content=f"answer {self.calls}", usage=Usage(10, 5), latency_s=0.01, attempts=1, model="m")


def test_cached_chat_through_the_actor_pays_a_call_once_for_every_node() -> None:
    actor = FakeCacheActor()
    request = ChatRequest(model="m", messages=(("user", "q"),), max_tokens=8)
    a, b = _Provider(), _Provider()  # two workers on two nodes, one cache actor

    async def main() -> tuple[Completion, Completion]:
        first = await CachedChat(a, RemoteKV(actor, "responses"))(request)
        return first, await CachedChat(b, RemoteKV(actor, "responses"))(request)

    first, second = asyncio.run(main())
    assert (a.calls, b.calls) == (1, 0) and second.cached and second.content == first.content


@pytest.mark.parametrize("table", ["responses", "judgments"])
def test_remote_kv_is_one_table(table: str) -> None:
    actor = FakeCacheActor()
    asyncio.run(RemoteKV(actor, table).aput("k", {"x": 1}))
    assert actor.tables[table] == {"k": {"x": 1}} and len(actor.tables) == 2
