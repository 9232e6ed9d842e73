"""Persistent caches (SQLite WAL, shared by processes), compaction, dedup writes, manifests."""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import os
import sqlite3

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shp_ray.generation.datasets import Scenario
from shp_ray.generation.judge import JudgeResult
from shp_ray.generation.services import CachedChat, JudgeService, completion_from_record, completion_record
from shp_ray.providers.base import ChatRequest, Completion, Usage
from storage.cache import JudgeCache, ResponseCache
from storage.compact import HIDDEN_SUFFIX, JOURNAL_PREFIX, compact_table, recover
from storage.manifest import REDACTED, redact, write_manifest
from storage.parts import Store
from storage.writer import StoreWriter


def _req(i: int) -> ChatRequest:
    return ChatRequest(model="m", messages=(("user", f"question {i}"),), seed=0)


def _writer_proc(path: str, start: int, n: int) -> None:
    cache = ResponseCache(path)
    for i in range(start, start + n):
        cache.put(
            _req(i).cache_key(), completion_record(_req(i), Completion(f"answer {i}", Usage(3, 4), latency_s=0.5))
        )


def test_response_cache_survives_processes_and_concurrent_writers(tmp_path) -> None:
    path = str(tmp_path / "r.sqlite")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer_proc, args=(path, k * 50, 60)) for k in range(3)]  # overlapping keys
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResponseCache(path)
    assert len(cache) == 160
    hit = completion_from_record(cache.get(_req(42).cache_key()))
    assert hit.cached and hit.content == "answer 42" and hit.usage == Usage(3, 4)
    other_seed = ChatRequest(model="m", messages=(("user", "question 42"),), seed=1)
    assert cache.get(other_seed.cache_key()) is None  # seed is in the key


def _open_new_files_at_once(paths: list[str], rank: int, barrier, errors) -> None:
    for path in paths:
        barrier.wait(30)
        try:
            cache = ResponseCache(path)
            cache.put(f"key {rank}", {"rank": rank})
            cache.close()
        except sqlite3.OperationalError as exc:
            errors.put(f"{path}: {exc}")


def test_many_processes_opening_one_new_cache_file_at_once_all_get_in(tmp_path) -> None:
    # Ray starts a run's workers together, and each opens the (new) cache file: switching it to WAL
    # at the same instant deadlocks in SQLite, which then fails one of them without waiting.
    # Before the retry this failed about 1 open in 30 (11 of 320); 200 opens here.
    paths = [str(tmp_path / f"r{i}.sqlite") for i in range(25)]
    ctx = mp.get_context("fork")  # only sqlite3 runs in the children; fork keeps 8 starts cheap
    barrier, errors = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_open_new_files_at_once, args=(paths, r, barrier, errors)) for r in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    failures = []
    while not errors.empty():
        failures.append(errors.get())
    assert failures == [] and [p.exitcode for p in procs] == [0] * 8
    for path in paths:
        assert len(ResponseCache(path)) == 8


def _scenario(contexts: tuple[str, ...]) -> Scenario:
    return Scenario("s", "d", "test", "q", contexts, "g")


def test_judge_cache_keeps_only_clean_results(tmp_path) -> None:
    cache = JudgeCache(tmp_path / "j.sqlite")
    service = JudgeService("lexical", cache)
    ok_key, ok = asyncio.run(service.judge(_scenario(("c",)), "d"))
    bad_key, bad = asyncio.run(service.judge(_scenario(()), "d"))  # no contexts: NaN + error
    assert bad.error and cache.get(bad_key) is None
    assert JudgeResult.from_record(cache.get(ok_key)).metrics == ok.metrics
    again_key, again = asyncio.run(service.judge(_scenario(("c",)), "d"))
    assert again_key == ok_key and again.cached and again.metrics == ok.metrics and service.computed == 2


# Rows exactly as the caches have always written them (key, value text): caches already on users'
# disks must keep being read after any change to the code that makes or reads the records.
_OLD_RESPONSE = (
    '{"completion_tokens": 4, "content": "answer é", "key_parts": {"max_tokens": 256, "messages": '
    '[["user", "question 7"]], "model": "m", "seed": 0, "temperature": 0.0}, "latency_s": 0.5, '
    '"model": "m", "prompt_tokens": 3}'
)
_OLD_JUDGMENT = (
    '{"completion_tokens": 2, "error": "", "judge": "llm:m", "metrics": {"answer_relevancy": 0.5, '
    '"context_precision": null, "context_recall": 1.0, "faithfulness": 0.25}, "prompt_tokens": 5, '
    '"prompt_version": "v"}'
)


def _raw_rows(path, table: str) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT key, value FROM {table}").fetchall()


def test_cache_records_keep_their_on_disk_format(tmp_path) -> None:
    responses, judgments = ResponseCache(tmp_path / "r.sqlite"), JudgeCache(tmp_path / "j.sqlite")
    req = _req(7)
    responses.put(req.cache_key(), completion_record(req, Completion("answer é", Usage(3, 4), 0.5, model="m")))
    metrics = {"faithfulness": 0.25, "answer_relevancy": 0.5, "context_precision": math.nan, "context_recall": 1.0}
    judgments.put("k", JudgeResult(metrics, "llm:m", "v", 5, 2).to_record())
    assert _raw_rows(tmp_path / "r.sqlite", "responses") == [(req.cache_key(), _OLD_RESPONSE)]
    assert _raw_rows(tmp_path / "j.sqlite", "judgments") == [("k", _OLD_JUDGMENT)]


def test_cache_rows_written_earlier_are_still_read(tmp_path) -> None:
    req = _req(7)
    with sqlite3.connect(tmp_path / "r.sqlite") as conn:
        conn.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)")
        conn.execute("INSERT INTO responses VALUES (?, ?, 0)", (req.cache_key(), _OLD_RESPONSE))
    with sqlite3.connect(tmp_path / "j.sqlite") as conn:
        conn.execute("CREATE TABLE judgments (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)")
        conn.execute("INSERT INTO judgments VALUES ('k', ?, 0)", (_OLD_JUDGMENT,))

    class NoCalls:
        name = "no-calls"

        async def complete(self, request):  # noqa: ANN001, ANN202 - a hit must not reach the provider
            raise AssertionError("the cached completion was not read")

    chat = CachedChat(NoCalls(), ResponseCache(tmp_path / "r.sqlite"))
    hit = asyncio.run(chat(req))
    assert hit == Completion("answer é", Usage(3, 4), 0.5, attempts=1, model="m", cached=True)
    judged = JudgeResult.from_record(JudgeCache(tmp_path / "j.sqlite").get("k"))
    assert judged.cached and (judged.judge, judged.prompt_version, judged.tokens, judged.error) == ("llm:m", "v", 7, "")
    assert math.isnan(judged.metrics["context_precision"]) and judged.metrics["faithfulness"] == 0.25


def test_default_cache_dir_is_outside_every_table_glob(tmp_path) -> None:
    assert Store(tmp_path).cache_dir == tmp_path.resolve() / "_cache"
    assert Store(tmp_path.as_uri()).cache_dir == tmp_path.resolve() / "_cache"  # file://: the same folder


def _rounds(n: int, start: int) -> list[dict]:
    return [
        {
            "gen_id": "g",
            "scenario_id": f"s{start + i}",
            "round": 1,
            "draft": "d",
            "feedback": "",
            "draft_hash": "h",
            "writer_prompt_tokens": 1,
            "writer_completion_tokens": 1,
            "critic_prompt_tokens": 0,
            "critic_completion_tokens": 0,
            "writer_latency_s": 0.0,
            "critic_latency_s": 0.0,
            "embedding": np.full(384, 0.5, np.float32),
        }  # fmt: skip
        for i in range(n)
    ]


def _store_with_parts(tmp_path, parts: int = 5) -> Store:
    store = Store(tmp_path / "store")
    w = StoreWriter(store, 384, flush_every=1)
    for k in range(parts):
        w.add("rounds", _rounds(4, 4 * k))
        w.flush()
    return store


def test_compaction_merges_parts_without_losing_or_duplicating(tmp_path) -> None:
    store = _store_with_parts(tmp_path)
    before = store.read("rounds")
    assert len(store.parts("rounds")) == 5
    out = compact_table(store, "rounds")
    assert out == {"parts_before": 5, "parts_after": 1, "rows_moved": 20}
    after = store.read("rounds")
    assert sorted(after["scenario_id"].to_pylist()) == sorted(before["scenario_id"].to_pylist())
    assert after.schema.field("embedding").type == pa.list_(pa.float32(), 384)
    # One partition folder (the generation's), holding only the merged part.
    assert os.listdir(store.table_path("rounds")) == ["gen_id=g"]
    assert not [p for p in os.listdir(f"{store.table_path('rounds')}/gen_id=g") if not p.endswith(".parquet")]
    # The merged part is written like any other: hash-named, page checksums, and it verifies.
    from storage.parts import part_digest
    from storage.verify import verify_store

    (merged,) = store.parts("rounds")
    assert part_digest(merged) is not None
    assert all(c.ok for c in verify_store(store, ("rounds",), use_record=False))


def test_compaction_refuses_a_table_with_a_damaged_part(tmp_path) -> None:
    from storage.verify import DamagedStore

    store = _store_with_parts(tmp_path, 3)
    victim = store.parts("rounds")[1]
    with open(victim, "r+b") as fh:  # truncate: the part is damaged
        fh.truncate(100)
    with pytest.raises(DamagedStore, match="rounds"):
        compact_table(store, "rounds")
    assert len(store.parts("rounds")) == 3  # nothing merged, nothing moved


@pytest.mark.parametrize("stage", ["hidden_some", "hidden_all", "renamed"])
def test_compaction_killed_midway_is_recovered_without_duplicates(tmp_path, stage: str) -> None:
    store = _store_with_parts(tmp_path, 3)
    sources = store.parts("rounds")
    merged = pa.concat_tables([pq.read_table(p) for p in sources])
    folder = sources[0].rsplit("/", 1)[0]  # the generation's partition folder: a merge never leaves it
    tmp, final = f"{folder}/_tmp-x.partial", f"{folder}/part-merged.parquet"
    pq.write_table(merged, tmp)
    with open(f"{store.table_path('rounds')}/{JOURNAL_PREFIX}x.json", "w") as fh:
        json.dump({"sources": sources, "tmp": tmp, "final": final}, fh)
    hide = sources[:1] if stage == "hidden_some" else sources
    for s in hide:
        os.replace(s, s + HIDDEN_SUFFIX)
    if stage == "renamed":
        os.replace(tmp, final)
    # A reader in the middle never sees a row twice.
    mid = store.read("rounds")["scenario_id"].to_pylist()
    assert len(mid) == len(set(mid))
    assert recover(store) == 1
    ids = store.read("rounds")["scenario_id"].to_pylist()
    assert sorted(ids) == sorted(merged["scenario_id"].to_pylist()) and len(ids) == 12
    assert sorted(os.listdir(folder)) == sorted(p for p in os.listdir(folder) if p.endswith(".parquet"))


def test_writer_never_writes_a_key_twice_across_runs(tmp_path) -> None:
    store = Store(tmp_path / "s")
    judgment = {
        "judge_key": "k", "judge": "j", "judge_prompt_version": "v", "scenario_id": "s", "draft_hash": "h",
        "faithfulness": 0.5, "answer_relevancy": 0.5, "context_precision": 0.5, "context_recall": 0.5,
        "judge_prompt_tokens": 0, "judge_completion_tokens": 0, "error": "",
    }  # fmt: skip
    for _ in range(2):  # a second run (e.g. after a kill between parts) loads the keys already stored
        w = StoreWriter(store, 384)
        w.add_trajectory({"judgments": [judgment, judgment], "rounds": _rounds(1, 0)})
        w.flush()
    assert store.read("judgments").num_rows == 1


def test_manifest_redacts_secrets(tmp_path) -> None:
    cfg = {"provider": {"api_key_env": "OPENAI_API_KEY", "api_key": "sk-abcdefghijklmnop1234"},
           "note": "token sk-abcdefghijklmnop1234 leaked", "nested": [{"password": "hunter2"}]}  # fmt: skip
    red = redact(cfg)
    assert red["provider"] == {"api_key_env": "OPENAI_API_KEY", "api_key": REDACTED}
    assert "sk-abc" not in json.dumps(red) and red["nested"][0]["password"] == REDACTED
    store = Store(tmp_path / "s")
    row = write_manifest(store, "run-1", cfg, {"seed": 3}, "cmd")
    stored = store.read("manifests").to_pylist()[0]
    assert stored["run_id"] == "run-1" and "sk-abc" not in stored["config_json"]
    assert json.loads(stored["seeds_json"]) == {"seed": 3} and "ray" in json.loads(stored["packages_json"])
    assert row["git_commit"]
