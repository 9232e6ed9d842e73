"""Every stored call carries how it was paid (live / batch), old stores read as live, and the price
table reaches the replay from the sweep's config, a file of one's own, or an override."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_module

import analysis
from analysis.query import main as shp_query
from analysis.replay import signals_store
from conf.resolve import ConfigError, to_job
from shp_ray.generation.datasets import Scenario, load_scenarios
from shp_ray.generation.generate import GenerationConfig, RunOptions, generate
from shp_ray.generation.judge import llm_judge
from shp_ray.providers.base import BATCH, LIVE, ChatRequest, Completion, ProviderSpec, Usage
from storage.cache import RESPONSES_FILE, ResponseCache
from storage.compact import compact_table
from storage.parts import HASH_HEX, Store
from storage.schemas import ADDED_COLUMNS
from storage.verify import verify_store
from tests.gen_support import ScriptedProvider
from tests.test_costs import GEN, TABLE, hand_store, replay_rows

COST_COLUMNS = (
    "operational_cost_usd",
    "operational_cost_live_usd",
    "operational_cost_batch_usd",
    "evaluation_cost_usd",
)


class BatchScripted(ScriptedProvider):
    """The scripted provider answering as a Batch API would: the same replies, each marked batch."""

    async def complete(self, request: ChatRequest) -> Completion:
        c = await super().complete(request)
        return Completion(c.content, c.usage, c.latency_s, c.attempts, c.model, mode=BATCH)


def make_provider(spec: ProviderSpec):  # noqa: ANN201 - the provider factory generate() imports by name
    return BatchScripted(spec) if spec.kind == "scripted-batch" else ScriptedProvider(spec)


def test_the_mode_of_each_call_reaches_the_store_and_a_cache_hit_keeps_it(tmp_path) -> None:
    scenarios = load_scenarios("shp_paper", limit=2)
    cfg = GenerationConfig(max_rounds=3, embedder="fake-hash", judge="llm", workers=1, concurrency=2)
    cache = tmp_path / "cache"
    factory = "tests.test_call_modes:make_provider"
    batch = ProviderSpec(kind="scripted-batch", model="m")
    generate(
        scenarios,
        cfg,
        Store(tmp_path / "a"),
        batch,
        RunOptions(cache_dir=cache, provider_factory=factory, backend="local"),
    )
    rounds = Store(tmp_path / "a").read("rounds").to_pylist()
    assert {r["writer_mode"] for r in rounds} == {BATCH}
    assert {r["critic_mode"] for r in rounds if r["round"] < 3} == {BATCH}
    assert {r["critic_mode"] for r in rounds if r["round"] == 3} == {LIVE}  # no critic call at the last round
    assert {j["judge_mode"] for j in Store(tmp_path / "a").read("judgments").to_pylist()} == {BATCH}
    records = ResponseCache(cache / RESPONSES_FILE)
    key = next(iter(records._conn.execute("SELECT key FROM responses")))[0]
    assert records.get(key)["mode"] == BATCH
    # The same requests again (a live provider now): every call is a cache hit and keeps the mode it was paid at.
    live = ProviderSpec(kind="scripted", model="m")
    generate(
        scenarios,
        cfg,
        Store(tmp_path / "b"),
        live,
        RunOptions(cache_dir=cache, provider_factory=factory, backend="local"),
    )
    again = Store(tmp_path / "b").read("rounds").to_pylist()
    assert {r["writer_mode"] for r in again} == {BATCH}
    con = analysis.connect(tmp_path / "b")
    try:
        assert analysis.setup_of(con).batch
        assert con.execute("SELECT DISTINCT judge_mode FROM round_signals").fetchall() == [(BATCH,)]
    finally:
        con.close()


def test_a_judgment_is_batch_only_when_every_attempt_was() -> None:
    replies = iter([Completion("not json", Usage(5, 1), mode=BATCH), Completion(_JSON, Usage(5, 9), mode=LIVE)])

    async def chat(request: ChatRequest) -> Completion:
        return next(replies)

    scn = Scenario("s", "d", "test", "q?", ("c",), "gt")
    mixed = asyncio.run(llm_judge(chat, "m", scn, "draft"))
    assert (mixed.attempts, mixed.prompt_tokens, mixed.completion_tokens, mixed.mode) == (2, 10, 10, LIVE)

    async def batch_chat(request: ChatRequest) -> Completion:
        return Completion(_JSON, Usage(5, 9), mode=BATCH)

    assert asyncio.run(llm_judge(batch_chat, "m", scn, "draft")).mode == BATCH


_JSON = '{"faithfulness": 1, "answer_relevancy": 1, "context_precision": 1, "context_recall": 1}'


def _strip_added(store: Store, table: str) -> None:
    """Rewrite every part of ``table`` as a writer from before the added columns wrote it (hash-named)."""
    for path in store.parts(table):
        t = pq.read_table(path)
        t = t.drop_columns([c for c in ADDED_COLUMNS[table] if c in t.column_names])
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink, compression="zstd", write_page_checksum=True)
        data = sink.getvalue().to_pybytes()
        digest = hashlib.sha256(data).hexdigest()[:HASH_HEX]
        folder = path.rsplit("/", 1)[0]
        Path(f"{folder}/part-20250101T000000-{uuid.uuid4().hex[:12]}.sha256-{digest}.parquet").write_bytes(data)
        os.remove(path)


def _old_store(root: Path) -> Store:
    store = hand_store(root)
    for table in ("rounds", "judgments", "signals"):
        _strip_added(store, table)
    assert all(c not in pq.read_schema(p).names for p in store.parts("rounds") for c in ("writer_mode", "critic_mode"))
    return store


def test_an_old_store_stays_sound_reads_as_live_and_is_priced_exactly(tmp_path) -> None:
    new = replay_rows(_made(tmp_path / "new"))
    store = _old_store(tmp_path / "old")
    assert [c for c in verify_store(store, use_record=False) if not c.ok] == []
    assert {r["writer_mode"] for r in store.read("rounds").to_pylist()} == {LIVE}
    assert {r["judge_mode"] for r in store.read("judgments", columns=["judge_key", "judge_mode"]).to_pylist()} == {LIVE}
    old = replay_rows(tmp_path / "old")
    assert old.keys() == new.keys()
    for policy, row in old.items():  # the old signals lack the prompt tokens: read from the rounds, same dollars
        assert [row[c] for c in COST_COLUMNS] == pytest.approx([new[policy][c] for c in COST_COLUMNS], rel=1e-12)
    con = analysis.connect(analysis.ReplayScope(tmp_path / "old", prices=TABLE))
    try:
        assert not analysis.setup_of(con).batch
        modes = con.execute("SELECT DISTINCT writer_mode, critic_mode, judge_mode FROM round_signals").fetchall()
        assert modes == [(LIVE, LIVE, LIVE)]
    finally:
        con.close()
    checked = signals_store.check(Store(tmp_path / "old"))  # old rows lacking the new columns are no difference
    assert checked.checked_rows == 3 and checked.different_rows == 0


def _made(root: Path) -> Path:
    hand_store(root)
    return root


def test_old_and_new_parts_compact_into_one_that_reads_the_same(tmp_path) -> None:
    store = _old_store(tmp_path)
    before = replay_rows(tmp_path)
    extra = store.read("judgments").slice(0, 1).to_pylist()[0]
    extra.update(judge_key="k-new", draft_hash="h-new", judge_mode=BATCH)  # a judgment of no replayed draft
    store.write("judgments", pa.Table.from_pylist([extra]))
    compact_table(store, "judgments", small_bytes=1 << 30)
    assert len(store.parts("judgments")) == 1
    assert [c for c in verify_store(store, use_record=False) if not c.ok] == []
    modes = {j["judge_key"]: j["judge_mode"] for j in store.read("judgments").to_pylist()}
    assert modes == {"k0": LIVE, "k1": LIVE, "k2": LIVE, "k-new": BATCH}
    after = replay_rows(tmp_path)
    for policy, row in after.items():
        assert [row[c] for c in COST_COLUMNS] == pytest.approx([before[policy][c] for c in COST_COLUMNS], rel=1e-12)


def test_the_plain_duckdb_script_has_the_same_costs(tmp_path) -> None:
    root = _made(tmp_path / "store")
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text(
        'source: test prices\nas_of: "2026-01-02"\nmodels:\n  openai:\n'
        "    m-test: {input_per_mtok: 1.0, output_per_mtok: 2.0, batch_discount: 0.5}\n"
    )
    assert shp_query(["--store", str(root), "--prices", str(prices_file), "--write-init"]) == 0
    con = duckdb.connect()
    try:
        con.execute((root / "views.sql").read_text())
        k3 = con.execute("SELECT operational_cost_usd, evaluation_cost_usd FROM replay WHERE policy = 'fixed_k3'")
        assert k3.fetchall() == [(pytest.approx(0.00642), pytest.approx(0.000588))]
        assert con.execute("SELECT count(*) FROM prices WHERE model = 'm-test'").fetchall() == [(1,)]
    finally:
        con.close()
    assert shp_query(["--store", str(root), "--prices", str(tmp_path / "none.yaml"), "SELECT 1"]) == 2


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def _job(*overrides: str):
    return to_job(compose(config_name="config", overrides=list(overrides)))


def test_an_override_from_the_config_changes_the_figure(hydra_ctx, tmp_path) -> None:
    root = tmp_path / "store"
    hand_store(root, model="gpt-4o-mini", judge="llm:gpt-4o-mini")
    shipped = replay_rows(root, prices=_job().prices)["fixed_k1"]  # 1000 in x $0.15 + 100 out x $0.60
    assert shipped["operational_cost_usd"] == pytest.approx((1000 * 0.15 + 100 * 0.60) / 1e6, rel=1e-12)
    assert shipped["operational_cost_batch_usd"] == pytest.approx(shipped["operational_cost_live_usd"] / 2)
    job = _job(
        "prices.models.openai.gpt-4o-mini.input_per_mtok=0.3", "prices.models.openai.gpt-4o-mini.batch_discount=0.25"
    )
    cheaper = replay_rows(root, prices=job.prices)["fixed_k1"]
    assert cheaper["operational_cost_usd"] == pytest.approx((1000 * 0.3 + 100 * 0.60) / 1e6, rel=1e-12)
    assert cheaper["operational_cost_batch_usd"] == pytest.approx(cheaper["operational_cost_live_usd"] * 0.75)
    # a model whose name has a dot, or a new one: a dict merged into the kind's entries
    added = _job(
        "+prices.models.openai={gpt-4.1-mini: {input_per_mtok: 9.0}, my-model: {input_per_mtok: 1, output_per_mtok: 2}}"
    )
    assert added.prices.lookup("openai", "gpt-4.1-mini").input_per_mtok == 9.0
    assert added.prices.lookup("openai", "gpt-4.1-mini").output_per_mtok == 1.6  # the rest of its entry kept
    assert added.prices.lookup("openai", "my-model").output_per_mtok == 2.0
    with pytest.raises(ConfigError, match=r"prices\.models\.openai\.gpt-4o\.batch_discount: must be a share"):
        _job("prices.models.openai.gpt-4o.batch_discount=1.5")
    with pytest.raises(ConfigError, match=r"prices\.as_of: must be a date"):
        _job("prices.as_of=last-week")


def test_a_table_of_ones_own_replaces_the_shipped_one(hydra_ctx, tmp_path) -> None:
    (tmp_path / "conf" / "prices").mkdir(parents=True)
    (tmp_path / "conf" / "prices" / "mine.yaml").write_text(
        'source: my gateway contract\nas_of: "2026-02-03"\nmodels:\n  openai:\n'
        "    m-test: {input_per_mtok: 2.0, output_per_mtok: 4.0}\n"
    )
    job = _job(f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "prices=mine")
    assert (job.prices.source, job.prices.as_of) == ("my gateway contract", "2026-02-03")
    assert job.prices.lookup("openai", "gpt-4o-mini") is None  # the shipped entries are gone: it replaces them
    root = _made(tmp_path / "store")
    k1 = replay_rows(root, prices=job.prices)["fixed_k1"]
    assert (k1["gen_id"], k1["operational_cost_usd"]) == (GEN, pytest.approx(2 * 0.0012, rel=1e-12))


def test_a_remote_stores_dataset_reads_an_old_part_as_live(tmp_path) -> None:
    """A store on object storage is read through a registered pyarrow dataset of the table's whole schema
    (analysis.replay.sources): an old part's missing mode is NULL there, and the view gives it its meaning."""
    import pyarrow.dataset as pds

    from analysis import sql
    from analysis.replay.sources import _as_read, added
    from storage.schemas import TABLES

    store = _old_store(tmp_path)
    fmt = pds.ParquetFileFormat()
    fragments = [fmt.make_fragment(p, store.fs) for p in store.parts("rounds")]
    dataset = pds.FileSystemDataset(fragments, _as_read(TABLES["rounds"]), fmt, store.fs)
    con = duckdb.connect()
    try:
        con.register("_store_rounds", dataset)
        view = sql.with_added_values("SELECT * FROM _store_rounds", added("rounds"))
        assert con.execute(f"SELECT DISTINCT writer_mode, critic_mode FROM ({view})").fetchall() == [(LIVE, LIVE)]
    finally:
        con.close()
