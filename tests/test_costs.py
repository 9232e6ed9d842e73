"""Costs in dollars: the replay's cost columns over a real small store in real DuckDB, against figures
worked out by hand from docs/design.md's token accounting; live vs batch; unpriced models; the price table."""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import analysis
from analysis.replay import costs
from analysis.replay.policy_table import default_policies
from analysis.report import write_report
from shp_ray.generation.judge import LEXICAL_NAME, llm_judge_name
from shp_ray.generation.records import signal_rows
from shp_ray.policy.table import family_policies, policy_by_name, standard_policies
from shp_ray.providers import base
from shp_ray.providers.prices import ModelPrice, PriceTable, default_prices, load_prices, price_table
from storage.parts import Store
from storage.schemas import CALL_MODES, METRIC_COLUMNS, rounds_schema
from storage.synthetic import SYNTHETIC_KIND, SyntheticSpec, write_synthetic_store

DIM = 4
GEN = "hand-gen"
# $1 per million input tokens, $2 per million output tokens, batch half price: dollars are easy to work by hand.
TABLE = PriceTable(
    source="test prices", as_of="2026-01-02", models={"openai": {"m-test": ModelPrice(1.0, 2.0, batch_discount=0.5)}}
)
# Per round: writer (prompt, completion), critic (prompt, completion; none at the last round), judge (prompt,
# completion) and the IS metrics (up, up, down: the gain cascade halts at round 3; the oracle picks round 2).
WRITER = [(1000, 100), (1200, 150), (1400, 200)]
CRITIC = [(800, 50), (900, 60), (0, 0)]
JUDGE = [(500, 20), (520, 22), (540, 24)]
SCORES = [0.5, 0.7, 0.6]


def _dollars(prompt: int, completion: int, price: float = 1.0) -> float:
    return (prompt * 1.0 + completion * 2.0) * price / 1e6


def hand_store(
    root: Path,
    *,
    kind: str = "openai",
    model: str = "m-test",
    judge: str = llm_judge_name("m-test"),
    writer_modes: tuple[str, ...] = ("live", "live", "live"),
    judge_tokens: bool = True,
) -> Store:
    """One generation of one trajectory of three rounds, with the tokens above, through Store.write."""
    store = Store(root)
    parts = {"provider_kind": kind, "model": model}
    store.write(
        "generations",
        pa.table(
            {
                "gen_id": [GEN], "model": [model], "prompt_version": ["p"], "max_rounds": [3], "temperature": [0.0],
                "seed": [0], "embedder": ["e"], "embedding_dim": [DIM],
                "config_json": [json.dumps({"gen_id_parts": parts})], "created_at": [datetime.now(UTC)],
            }
        ),
    )  # fmt: skip
    store.write(
        "scenarios",
        pa.table(
            {
                "scenario_id": ["s1"], "dataset": ["hand"], "split": ["test"], "question": ["Who?"],
                "contexts": [["A context."]], "ground_truth": ["Ada"], "references": [[]], "meta_json": ["{}"],
            }
        ),
    )  # fmt: skip
    drafts = [f"Draft {t}. Answer: Ada" for t in (1, 2, 3)]
    rows = []
    for t in range(3):
        emb = np.zeros(DIM, np.float32)
        emb[t % DIM] = 1.0
        rows.append(
            {
                "gen_id": GEN, "scenario_id": "s1", "round": t + 1, "draft": drafts[t],
                "feedback": "" if t == 2 else "Revise: more.",
                "draft_hash": hashlib.sha256(drafts[t].encode()).hexdigest(),
                "writer_prompt_tokens": WRITER[t][0], "writer_completion_tokens": WRITER[t][1],
                "critic_prompt_tokens": CRITIC[t][0], "critic_completion_tokens": CRITIC[t][1],
                "writer_latency_s": 0.1, "critic_latency_s": 0.1, "embedding": emb,
                "writer_mode": writer_modes[t], "critic_mode": "live",
            }
        )  # fmt: skip
    store.write("rounds", pa.Table.from_pylist(rows, schema=rounds_schema(DIM)), rounds_schema(DIM))
    store.write("signals", pa.Table.from_pylist(signal_rows(rows, {"s1": "Ada"}, {GEN: "e"})))
    judgments = [
        {
            "judge_key": f"k{t}", "judge": judge, "judge_prompt_version": "v", "scenario_id": "s1",
            "draft_hash": rows[t]["draft_hash"], **{m: SCORES[t] for m in METRIC_COLUMNS},
            "judge_prompt_tokens": JUDGE[t][0] if judge_tokens else 0,
            "judge_completion_tokens": JUDGE[t][1] if judge_tokens else 0, "error": "", "judge_mode": "live",
        }
        for t in range(3)
    ]  # fmt: skip
    store.write("judgments", pa.Table.from_pylist(judgments))
    return store


def replay_rows(root: Path, prices: PriceTable | None = TABLE, policies=None) -> dict[str, dict]:
    con = analysis.connect(analysis.ReplayScope(root, prices=prices, policies=policies))
    try:
        cur = con.execute("SELECT * FROM replay")
        names = [d[0] for d in cur.description]
        return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    finally:
        con.close()


def test_dollars_worked_out_by_hand(tmp_path) -> None:
    hand_store(tmp_path)
    rows = replay_rows(tmp_path)
    # fixed_k1: the writer of round 1 (1000 in, 100 out); judged, never charged: evaluation = round 1's judge.
    k1 = rows["fixed_k1"]
    assert k1["operational_tokens"] == 1100
    assert k1["operational_cost_usd"] == pytest.approx(0.0012, rel=1e-12)
    assert k1["evaluation_cost_usd"] == pytest.approx(_dollars(500, 20), rel=1e-12) == pytest.approx(0.00054)
    # fixed_k3: writers 1..3 (3600 in, 450 out) + critics 1..2 (1700 in, 110 out) = 5300 + 2 x 560 = $0.00642.
    k3 = rows["fixed_k3"]
    assert k3["operational_cost_usd"] == pytest.approx(0.00642, rel=1e-12)
    assert k3["operational_cost_live_usd"] == pytest.approx(0.00642, rel=1e-12)
    assert k3["operational_cost_batch_usd"] == pytest.approx(0.00321, rel=1e-12)
    assert k3["evaluation_cost_usd"] == pytest.approx(_dollars(540, 24), rel=1e-12)
    # abl_gain_only consults IS: it halts at round 3 (IS fell) and pays the judge of rounds 1..3 too:
    # 1560 in + 66 out = $0.001692 on top of the loop.
    gain = rows["abl_gain_only"]
    assert (gain["stop_round"], gain["reason"]) == (3, "no_gain")
    assert gain["operational_cost_usd"] == pytest.approx(0.00642 + 0.001692, rel=1e-12)
    # the oracle returns round 2 (highest IS) but pays every writer and judge and T - 1 critics.
    oracle = rows["oracle_is"]
    assert oracle["stop_round"] == 2
    assert oracle["operational_cost_usd"] == pytest.approx(0.00642 + 0.001692, rel=1e-12)
    assert oracle["evaluation_cost_usd"] == pytest.approx(_dollars(520, 22), rel=1e-12)
    # a judge-free family row: the loop to its stop round, never the judge
    fam = replay_rows(tmp_path, policies=[policy_by_name("budget@budget=2000,cycle=3", standard_policies()[0].halt)])
    (row,) = fam.values()
    tau = row["stop_round"]
    loop = [*WRITER[:tau], *CRITIC[: tau - 1]]
    assert row["operational_tokens"] == sum(p + c for p, c in loop)
    assert row["operational_cost_usd"] == pytest.approx(_dollars(sum(p for p, _ in loop), sum(c for _, c in loop)))


def test_each_call_is_priced_at_the_mode_it_was_paid(tmp_path) -> None:
    """Round 2's writer was a batch call: as paid, it costs half; live / batch price every call one way."""
    hand_store(tmp_path, writer_modes=("live", "batch", "live"))
    rows = replay_rows(tmp_path)
    k3 = rows["fixed_k3"]
    assert k3["operational_cost_usd"] == pytest.approx(0.00642 - _dollars(1200, 150) / 2, rel=1e-12)
    assert k3["operational_cost_live_usd"] == pytest.approx(0.00642, rel=1e-12)
    assert k3["operational_cost_batch_usd"] == pytest.approx(0.00321, rel=1e-12)
    assert rows["fixed_k1"]["operational_cost_usd"] == pytest.approx(0.0012, rel=1e-12)  # round 1 was live


def test_live_vs_batch_is_the_discount_and_as_paid_lies_between(tmp_path) -> None:
    """A synthetic store with a third of its calls in batch mode, priced with a 40% batch discount:
    batch / live = 0.6 on every row, and as paid equals a Python sum over the stored calls."""
    root = tmp_path / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=40, rounds=4, seed=5, ragged=True, batch_rate=0.33))
    table = PriceTable("t", "2026-01-02", {SYNTHETIC_KIND: {"*": ModelPrice(0.15, 0.6, batch_discount=0.4)}})
    con = analysis.connect(
        analysis.ReplayScope(root, prices=table, policies=[p for p in default_policies() if not p.consults_is])
    )
    try:
        assert analysis.setup_of(con).batch
        got = con.sql(
            "SELECT policy, scenario_id, stop_round, operational_cost_usd, operational_cost_live_usd, "
            "operational_cost_batch_usd FROM replay"
        ).fetchall()
    finally:
        con.close()
    rounds = Store(root).read("rounds").to_pylist()
    calls: dict[str, list[dict]] = {}
    for r in sorted(rounds, key=lambda r: (r["scenario_id"], r["round"])):
        calls.setdefault(r["scenario_id"], []).append(r)

    def paid(sid: str, tau: int) -> float:
        total = 0.0
        for r in calls[sid][:tau]:
            f = 0.6 if r["writer_mode"] == "batch" else 1.0
            total += (r["writer_prompt_tokens"] * 0.15 + r["writer_completion_tokens"] * 0.6) * f / 1e6
        for r in calls[sid][: tau - 1]:
            f = 0.6 if r["critic_mode"] == "batch" else 1.0
            total += (r["critic_prompt_tokens"] * 0.15 + r["critic_completion_tokens"] * 0.6) * f / 1e6
        return total

    assert len(got) == 40 * 9 and any(m == "batch" for r in rounds for m in (r["writer_mode"], r["critic_mode"]))
    for _, sid, tau, as_paid, live, batch in got:
        assert batch == pytest.approx(0.6 * live, rel=1e-12)
        assert batch - 1e-15 <= as_paid <= live + 1e-15
        assert as_paid == pytest.approx(paid(sid, tau), rel=1e-12)


def test_an_unpriced_model_is_null_and_said_never_zero(tmp_path) -> None:
    root = tmp_path / "store"
    hand_store(root, kind="openai", model="no-such-model", judge=llm_judge_name("no-such-model"))
    rows = replay_rows(root, prices=default_prices())
    for r in rows.values():
        assert r["operational_tokens"] > 0
        for c in ("operational_cost_usd", "operational_cost_live_usd", "operational_cost_batch_usd"):
            assert r[c] is None, (r["policy"], c)
        assert r["evaluation_cost_usd"] is None
    con = analysis.connect(root)
    try:
        summary = con.sql("SELECT mean_operational_cost_usd, mean_evaluation_cost_usd FROM policy_summary").fetchall()
        assert summary and all(v is None for row in summary for v in row)
        (said,) = [u.sentence(analysis.setup_of(con).judge) for u in costs.unpriced(con)]
    finally:
        con.close()
    assert "openai/no-such-model" in said and "NULL" in said and "not free" in said
    md = write_report(root, tmp_path / "report", n_resamples=50).read_text()
    assert "**Unpriced**" in md and "openai/no-such-model" in md
    assert "as of 2026-07-05" in md and "apicalculators.com" in md  # the shipped table's date and source
    line = next(ln for ln in md.splitlines() if ln.startswith("| fixed_k3 | 3.00"))
    assert "| – | – |" in line and "$0.0" not in line


def test_a_judge_that_makes_no_call_costs_nothing_whatever_the_table(tmp_path) -> None:
    """The lexical judge (0 tokens, no model) costs $0, not NULL; an IS-consulting policy pays the loop only."""
    root = tmp_path / "store"
    hand_store(root, judge=LEXICAL_NAME, judge_tokens=False)
    rows = replay_rows(root)
    assert rows["fixed_k1"]["evaluation_cost_usd"] == 0.0
    assert rows["abl_gain_only"]["operational_cost_usd"] == pytest.approx(0.00642, rel=1e-12)
    con = analysis.connect(analysis.ReplayScope(root, prices=TABLE))
    try:
        assert costs.unpriced(con) == []  # nothing to say: the judge had nothing to price
    finally:
        con.close()


def test_the_report_and_summary_show_dollars_beside_tokens(tmp_path) -> None:
    root = tmp_path / "store"
    hand_store(root)
    con = analysis.connect(analysis.ReplayScope(root, prices=TABLE))
    try:
        (live, batch, paid, ev) = con.execute(
            "SELECT mean_operational_cost_live_usd, mean_operational_cost_batch_usd, mean_operational_cost_usd, "
            "mean_evaluation_cost_usd FROM policy_summary WHERE policy = 'fixed_k3'"
        ).fetchone()
    finally:
        con.close()
    assert (live, batch, paid) == (pytest.approx(0.00642), pytest.approx(0.00321), pytest.approx(0.00642))
    assert ev == pytest.approx(_dollars(540, 24))
    md = write_report(analysis.ReplayScope(root, prices=TABLE), tmp_path / "report", n_resamples=50).read_text()
    assert "| policy | rounds | op. tokens | $ live | $ batch |" in md
    assert "- Prices: test prices, **as of 2026-01-02**" in md and "Unpriced" not in md
    assert "| fixed_k3 | 5860 | $0.006420 | $0.006420 | $0.003210 |" in md  # the costs section


def test_the_shipped_table_and_its_rules() -> None:
    table = load_prices(Path(__file__).parents[1] / "shp_ray" / "data" / "prices.yaml")
    assert table == default_prices() and table.as_of == "2026-07-05" and "apicalculators.com" in table.source
    mini = table.lookup("openai", "gpt-4o-mini")
    assert (mini.input_per_mtok, mini.output_per_mtok, mini.cached_input_per_mtok, mini.batch_discount) == (
        0.15, 0.60, 0.075, 0.5,
    )  # fmt: skip
    assert table.lookup("llama", "qwen2.5-coder-0.5b-instruct").output_per_mtok == 0.0  # "*": every local model
    assert table.lookup("sim", "anything").input_per_mtok == 0.0
    assert table.lookup("openai", "meta-llama/Llama-3.1-8B-Instruct") is None  # a vLLM model: no price, not $0
    assert table.lookup(None, "gpt-4o-mini") is None

    def one(**entry: object) -> dict[str, object]:
        return {"source": "s", "as_of": "2026-01-02", "models": {"o": {"m": entry}}}

    for data, said in [
        (one(input_per_mtok=-1, output_per_mtok=1), "prices.models.o.m.input_per_mtok: must be a finite number >= 0"),
        (one(input_per_mtok=1), "prices.models.o.m.output_per_mtok: required"),
        (
            one(input_per_mtok=1, output_per_mtok=1, batch_discount=2),
            "prices.models.o.m.batch_discount: must be a share",
        ),
        (one(input_per_mtok=1, output_per_mtok=1, batch=0.5), "prices.models.o.m: unknown key ['batch']"),
        ({"source": "s", "as_of": "July", "models": {}}, "prices.as_of: must be a date YYYY-MM-DD"),
        ({"source": "", "as_of": "2026-01-02"}, "prices.source"),
        ({"source": "s", "as_of": "2026-01-02", "currency": "EUR"}, "unknown key ['currency']"),
    ]:
        with pytest.raises(ValueError, match=re.escape(said)):
            price_table(data)


def test_the_judge_name_contract_and_the_call_modes_agree_across_rooms() -> None:
    assert costs.judge_model(llm_judge_name("gpt-4o-mini")) == "gpt-4o-mini"
    assert costs.judge_model(LEXICAL_NAME) is None and costs.judge_model(None) is None
    assert CALL_MODES == base.CALL_MODES == ("live", "batch")
    with pytest.raises(ValueError, match="Completion.mode"):
        base.Completion("x", mode="offline")


def test_every_policy_has_its_costs_on_a_priced_synthetic_store(tmp_path) -> None:
    """Cascade, random, oracle and family rows all carry the four cost columns (none NULL when priced)."""
    root = tmp_path / "store"
    write_synthetic_store(root, SyntheticSpec(n_trajectories=12, rounds=3, seed=2, dim=8))
    table = PriceTable("t", "2026-01-02", {SYNTHETIC_KIND: {"*": ModelPrice(1.0, 1.0)}})
    halt = standard_policies()[0].halt
    pols = [p for p in default_policies() if not p.consults_is] + list(family_policies(halt))[:3]
    con = analysis.connect(analysis.ReplayScope(root, prices=table, policies=pols))
    try:
        t = con.sql("SELECT * FROM replay").to_arrow_table()
    finally:
        con.close()
    assert t.num_rows == 12 * len(pols)
    # price 1.0 for input and output: dollars x 1e6 are the token counts, exactly
    op = pc.multiply(t["operational_cost_live_usd"], 1e6).to_pylist()
    assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(op, t["operational_tokens"].to_pylist(), strict=True))
    assert pc.all(pc.equal(t["operational_cost_usd"], t["operational_cost_live_usd"])).as_py()  # all live calls
