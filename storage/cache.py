"""Persistent caches on SQLite (WAL): LLM responses and judge results.

One row per completed call, committed as the call completes, so a rerun after
``kill -9`` repeats no paid call that had finished. WAL mode lets many Ray
actors (processes) read and write the same file; writers wait on a busy
timeout instead of failing. Caches live on the local disk (SQLite cannot sit
on object storage): by default ``<store root>/_cache`` for a local store --
a folder DuckDB's ``<table>/*.parquet`` globs never see.

- :class:`ResponseCache`: ``ChatRequest.cache_key()`` -> Completion (content,
  usage, latency). Only successful completions are stored.
- :class:`JudgeCache`: judge key -> JudgeResult JSON, shared across runs and
  sweeps. Only results without an error are stored (a failed parse is retried
  on the next run, cheaply, through the response cache).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

RESPONSES_FILE = "responses.sqlite"
JUDGMENTS_FILE = "judgments.sqlite"
CACHE_DIRNAME = "_cache"


def default_cache_dir(store_root: str | Path) -> Path:
    """``<root>/_cache`` for a local store; ``~/.cache/shp-ray`` for an object-store URI."""
    text = str(store_root)
    if "://" in text and not text.startswith("file://"):
        return Path.home() / ".cache" / "shp-ray"
    return Path(text.removeprefix("file://")).resolve() / CACHE_DIRNAME


class _SqliteKV:
    """A small key -> JSON table; one connection per process, guarded for threads."""

    table = "kv"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable across a process kill
        self._conn.execute("PRAGMA busy_timeout=60000")
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
        )
        self.hits = 0
        self.misses = 0

    def get_json(self, key: str) -> dict | None:
        with self._lock:
            row = self._conn.execute(f"SELECT value FROM {self.table} WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put_json(self, key: str, value: dict) -> None:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
        with self._lock:
            # INSERT OR IGNORE: two actors racing on the same key keep the first answer.
            self._conn.execute(
                f"INSERT OR IGNORE INTO {self.table} (key, value, created) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class ResponseCache(_SqliteKV):
    table = "responses"

    def get(self, request):  # noqa: ANN001, ANN201 - ChatRequest -> Completion | None
        from shp_ray.providers.base import Completion, Usage

        d = self.get_json(request.cache_key())
        if d is None:
            return None
        return Completion(
            content=d["content"],
            usage=Usage(d["prompt_tokens"], d["completion_tokens"]),
            latency_s=d["latency_s"],
            attempts=1,
            model=d.get("model", ""),
            cached=True,
        )

    def put(self, request, completion) -> None:  # noqa: ANN001
        self.put_json(
            request.cache_key(),
            {
                "content": completion.content,
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
                "latency_s": completion.latency_s,
                "model": completion.model,
                "key_parts": request.key_parts(),
            },
        )


class JudgeCache(_SqliteKV):
    table = "judgments"

    def get(self, key: str):  # noqa: ANN201 - JudgeResult | None
        from shp_ray.generation.judge import JudgeResult

        d = self.get_json(key)
        return None if d is None else JudgeResult.from_json(json.dumps(d), cached=True)

    def put(self, key: str, result) -> None:  # noqa: ANN001
        if not result.error:
            self.put_json(key, json.loads(result.to_json()))
