"""The driver's caches for the whole cluster: one actor owns the SQLite files, other nodes reach it.

The response cache and the judge cache (:mod:`storage.cache`) are SQLite files in WAL mode on the
driver's disk. WAL is safe for many processes of ONE host, so the actors on the driver's node keep
opening the files directly (the single-machine path, unchanged); an actor on any other node gets
and puts through :class:`CacheActor`, pinned to the driver's node. A paid call completed on any
node is therefore in the one cache before its trajectory goes on, and no node or rerun pays it
again.

A put is acknowledged only once SQLite has committed it (the caller awaits it), so a node that dies
loses nothing it had been told was stored; only calls still in flight on it are paid again.

:class:`RemoteKV` batches every get (and every put) issued in one event-loop tick into ONE actor
call, so a worker with hundreds of trajectories in flight costs the actor a few calls per tick.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import ray

from storage.cache import JUDGMENTS_FILE, RESPONSES_FILE, JudgeCache, ResponseCache

RESPONSES = "responses"
JUDGMENTS = "judgments"


@ray.remote(num_cpus=0)
class CacheActor:
    """The SQLite caches of one cache folder, served to the nodes that cannot open them."""

    def __init__(self, cache_dir: str) -> None:
        folder = Path(cache_dir)
        self.kv = {RESPONSES: ResponseCache(folder / RESPONSES_FILE), JUDGMENTS: JudgeCache(folder / JUDGMENTS_FILE)}
        self.served = {"calls": 0, "gets": 0, "puts": 0}

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def get_many(self, table: str, keys: list[str]) -> list[dict | None]:
        kv = self.kv[table]
        self.served["calls"] += 1
        self.served["gets"] += len(keys)
        return await asyncio.to_thread(lambda: [kv.get(k) for k in keys])

    @ray.method(enable_task_events=False)  # high volume: keep GCS memory flat
    async def put_many(self, table: str, items: list[tuple[str, dict]]) -> None:
        kv = self.kv[table]
        self.served["calls"] += 1
        self.served["puts"] += len(items)

        def put_all() -> None:
            for k, record in items:
                kv.put(k, record)

        await asyncio.to_thread(put_all)

    async def stats(self) -> dict[str, int]:
        return {**self.served, **{f"{name}_rows": len(kv) for name, kv in self.kv.items()}}


def start_cache_actor(cache_dir: str | Path, pin: dict[str, Any]) -> Any:
    """The run's cache actor (``pin``: the options that place it on the driver's node)."""
    # Restarted in place if its process dies (its state is the files; a get or put is safe to repeat).
    return CacheActor.options(max_concurrency=1000, max_restarts=-1, max_task_retries=-1, **pin).remote(str(cache_dir))  # type: ignore[attr-defined]  # a Ray ActorClass


class _TickBatch:
    """Items added in one event-loop tick travel in one ``send`` call; each caller gets its own result."""

    def __init__(self, send: Callable[[list[Any]], Awaitable[list[Any] | None]]) -> None:
        self._send = send
        self._items: list[tuple[Any, asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        if not self._items:
            loop.call_soon(self._flush)
        self._items.append((item, fut))
        return await fut

    def _flush(self) -> None:
        batch, self._items = self._items, []
        task = asyncio.get_running_loop().create_task(self._deliver(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, batch: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        try:
            results = await self._send([item for item, _ in batch])
        except BaseException as exc:  # noqa: BLE001 - every caller of the batch sees the error
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for i, (_, fut) in enumerate(batch):
            if not fut.done():
                fut.set_result(None if results is None else results[i])


class RemoteKV:
    """One table of a :class:`CacheActor`, with the async ``aget``/``aput`` that
    :func:`shp_ray.generation.services.cache_get` / ``cache_put`` use."""

    def __init__(self, actor: Any, table: str) -> None:
        self.actor, self.table = actor, table
        self._get = _TickBatch(lambda keys: self.actor.get_many.remote(self.table, keys))
        self._put = _TickBatch(self._put_many)

    async def _put_many(self, items: list[tuple[str, dict]]) -> None:
        await self.actor.put_many.remote(self.table, items)

    async def aget(self, key: str) -> dict | None:
        return await self._get(key)

    async def aput(self, key: str, record: dict) -> None:
        await self._put((key, record))


def response_cache(cache_dir: str | Path, actor: Any | None) -> ResponseCache | RemoteKV:
    """The response cache as a process on this node reaches it: the file itself, or through ``actor``."""
    return ResponseCache(Path(cache_dir) / RESPONSES_FILE) if actor is None else RemoteKV(actor, RESPONSES)


def judge_cache(cache_dir: str | Path, actor: Any | None) -> JudgeCache | RemoteKV:
    """The judge cache as a process on this node reaches it: the file itself, or through ``actor``."""
    return JudgeCache(Path(cache_dir) / JUDGMENTS_FILE) if actor is None else RemoteKV(actor, JUDGMENTS)
