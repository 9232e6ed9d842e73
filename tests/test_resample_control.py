"""resample_equal_compute, the self-repair literature's control (shp_ray.policy.resample; docs/policies.md): over a
store that holds a revising generation and its critic=none control, each revising trajectory gets the fresh drafts
its fixed_k{T} budget buys and the first the visible tests pass. The SQL replay (resample_control.sql, through
replay_scores and the correctness tables) is held equal to the reference over random trajectories of a small store
built here (real imports, real DuckDB), and on the shipped revising store, which it replays without a model call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import analysis
from analysis.report.correctness import policy_lines
from analysis.sql.rows import fetch_dicts
from analysis.stats import correctness
from analysis.stats.correctness import code_policies
from shp_ray.importer.cli import main as shp_import
from shp_ray.policy import resample
from storage.parts import Store
from sweeps.code_results import render

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "results/humaneval-revise/store"
DEPTH = 4
N = 16
CONTROL_ROWS = "SELECT * FROM replay_scores WHERE policy = ? AND score = 'hidden_pass'"


def _trace(i: int, rng: np.random.Generator, revising: bool) -> dict:
    """One trajectory: a revising one pays its Critic and longer prompts; a resampling one only first prompts, of a
    length drawn so that a budget sometimes buys fewer than DEPTH fresh drafts."""
    rounds = []
    for t in range(1, DEPTH + 1):
        writer = int(rng.integers(50, 200)) if revising else int(rng.integers(50, 400))
        critic = int(rng.integers(0, 60)) if revising and t < DEPTH else 0
        rounds.append({
            "draft": f"def f():\n    return {i * 10 + t}{'' if revising else ' + 0'}\n",
            "feedback": f"Fix case {t}." if revising and t < DEPTH else "",
            "tokens": {"writer_prompt": writer, "writer_completion": 20, "critic_prompt": critic,
                       "critic_completion": 0},
            "scores": {"hidden_pass": float(rng.random() < 0.5), "visible_pass": float(rng.choice([0.0, 0.5, 1.0]))},
            "embedding": [float(x) for x in rng.normal(size=4)],
        })  # fmt: skip
    return {"id": f"he-{i:02d}", "question": f"task {i}", "split": "dev" if i < 4 else "test", "rounds": rounds}


def _import(folder: Path, name: str, traces: list[dict]) -> str:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))
    assert shp_import([str(path), "--store", str(folder / "store")]) == 0
    return str(path)


def _mark_resampling(store: Store, source: str) -> str:
    """The imported generation read from ``source`` becomes a critic=none one: its generations part is replaced by
    the same row with ``generation.critic`` recorded (an import records no Critic; a generated store does)."""
    for part in store.parts("generations"):
        table = pq.read_table(part)
        (row,) = table.to_pylist()
        config = json.loads(row["config_json"])
        if config["source"] == str(Path(source).resolve()):
            store.fs.delete_file(part)
            row["config_json"] = json.dumps({**config, "generation": {"critic": "none"}}, sort_keys=True)
            store.write("generations", pa.Table.from_pylist([row], schema=table.schema))
            return str(row["gen_id"])
    raise AssertionError(f"no generation imported from {source}")


def _loop_tokens(trace: dict) -> list[int]:
    """What the loop paid to each round: writers up to t, critics before t (replay_inputs' lt)."""
    paid, out = 0, []
    for t, r in enumerate(trace["rounds"], start=1):
        tok = r["tokens"]
        paid += tok["writer_prompt"] + tok["writer_completion"]
        out.append(paid)
        if t < len(trace["rounds"]):
            paid += tok["critic_prompt"] + tok["critic_completion"]
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resample")
    rng = np.random.default_rng(45)
    revising = [_trace(i, rng, True) for i in range(N)]
    resampling = [_trace(i, rng, False) for i in range(N)]
    _import(folder, "revising", revising)
    store = Store(str(folder / "store"))
    only_revising = render(store)  # one generation: no control in the store yet
    none = _mark_resampling(store, _import(folder, "resampling", resampling))
    return folder / "store", revising, resampling, none, only_revising


def test_the_sql_control_is_the_reference_on_every_trajectory(built) -> None:
    root, revising, resampling, none, _ = built
    con = analysis.connect(str(root), policies=code_policies(DEPTH))
    try:
        got = {r["scenario_id"]: r for r in fetch_dicts(con, CONTROL_ROWS, [resample.NAME])}
        rows = correctness.compare_pass(con, "hidden_pass")
    finally:
        con.close()
    assert len(got) == N and {r["drawn_from"] for r in got.values()} == {none}
    assert none not in {r["gen_id"] for r in got.values()}  # the control belongs to the generation that revises
    ns = set()
    for rev, res in zip(revising, resampling, strict=True):
        verified = [r["scores"]["visible_pass"] == 1.0 for r in res["rounds"]]
        n, returned = resample.equal_compute(_loop_tokens(rev)[-1], _loop_tokens(res), verified)
        row = got[rev["id"]]
        assert (row["stop_round"], row["returned_round"]) == (n, returned), rev["id"]
        assert row["operational_tokens"] == _loop_tokens(res)[n - 1]
        assert row["final_value"] == res["rounds"][returned - 1]["scores"]["hidden_pass"]  # the fresh draft's truth
        assert row["baseline_value"] == rev["rounds"][-1]["scores"]["hidden_pass"]  # paired with the revising run
        ns.add(n)
    assert len(ns) > 1  # the budget binds on some trajectories and not on others
    control = [r for r in rows if r["policy"] == resample.NAME]
    assert {r["kind"] for r in control} == {resample.KIND} and all(r["mean_is"] is None for r in control)
    for split in ("dev", "test"):
        mine = [r for r in rows if r["split"] == split and str(r["gen_id"]) != none]
        text = "\n".join(policy_lines(mine, "hidden_pass"))
        assert f"`{resample.NAME}`, the self-repair literature's control" in text
        names = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ")]
        at = names.index(f"| {resample.NAME}")
        assert names[at - 1] == "| oracle_visible_pass"  # beside the oracle rows (the bound), not alphabetically
        share = [line for line in text.splitlines() if line.startswith("- Share of the fixed_k1")]
        assert all(resample.NAME not in line for line in share)  # no policy of the loop: said on its own line


def test_a_store_without_a_critic_none_generation_leaves_it_out_with_one_line(built) -> None:
    *_, only_revising = built
    assert resample.NAME not in only_revising.replace(f"`{resample.NAME}` needs", "")
    lines = [line for line in only_revising.splitlines() if "No resampling control" in line]
    assert len(lines) == 2  # one per split, one line each


def test_the_code_section_of_the_revising_generation_shows_the_control(built) -> None:
    root, revising, _, none, _ = built
    gens = {g["gen_id"] for g in Store(str(root)).read("generations").to_pylist()}
    (rev,) = gens - {none}
    text = render(Store(str(root)), gen_id=rev)
    assert f"| {resample.NAME} | {resample.KIND} |" in text and "No resampling control" not in text
    other = render(Store(str(root)), gen_id=none)  # the resampling generation itself has no control beside it
    assert f"| {resample.NAME} |" not in other and "No resampling control" in other


@pytest.mark.parametrize(
    ("budget", "tokens", "verified", "expected"),
    [
        (100, [120, 240], [True, True], (1, 1)),  # not even one draft fits: the first is drawn all the same
        (500, [120, 240, 360, 480], [False, False, False, False], (4, 4)),
        (300, [120, 240, 360, 480], [False, False, True, True], (2, 2)),  # a later pass outside the budget
        (400, [120, 240, 360, 480], [False, True, True, False], (3, 2)),
    ],
)
def test_the_reference_draws_what_the_budget_buys_and_returns_the_first_verified(budget, tokens, verified, expected):
    assert resample.equal_compute(budget, tokens, verified) == expected


@pytest.mark.integration
def test_on_the_shipped_revising_store_it_replays_from_the_stored_drafts_alone(tmp_path) -> None:
    """On a copy (the shipped store is read, never written): every revising trajectory whose task and epoch the
    control holds gets its row, equal to the reference over the stored rounds and scores, and nothing is added to
    the store (no generation call, no part)."""
    copy = tmp_path / "store"
    shutil.copytree(SHIPPED, copy)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*.parquet"))
    store = Store(str(copy))
    critic = {g["gen_id"]: json.loads(g["config_json"])["generation"]["critic"]
              for g in store.read("generations").to_pylist()}  # fmt: skip
    (rev,) = [g for g, c in critic.items() if c != "none"]
    (none,) = [g for g, c in critic.items() if c == "none"]
    by_trajectory: dict[tuple[str, str], list[dict]] = {}
    for r in sorted(store.read("rounds").to_pylist(), key=lambda r: r["round"]):
        by_trajectory.setdefault((r["gen_id"], r["scenario_id"]), []).append(r)
    parts = ("writer_prompt", "writer_completion", "critic_prompt", "critic_completion")
    lt = {k: _loop_tokens({"rounds": [{"tokens": {n: r[f"{n}_tokens"] for n in parts}} for r in rs]})
          for k, rs in by_trajectory.items()}  # fmt: skip
    scores = {
        (s["gen_id"], s["scenario_id"], s["round"], s["score"]): s["value"] for s in store.read("scores").to_pylist()
    }
    con = analysis.connect(str(copy), policies=code_policies(DEPTH))
    try:
        got = fetch_dicts(con, CONTROL_ROWS, [resample.NAME])
    finally:
        con.close()
    expect = sorted(s for g, s in lt if g == rev and (none, s) in lt)
    assert sorted(r["scenario_id"] for r in got) == expect and len(expect) > 100
    for r in got:
        s = r["scenario_id"]
        verified = [scores.get((none, s, t, "visible_pass")) == 1.0 for t in range(1, DEPTH + 1)]
        n, returned = resample.equal_compute(lt[(rev, s)][-1], lt[(none, s)], verified)
        assert (r["gen_id"], r["drawn_from"], r["stop_round"], r["returned_round"]) == (rev, none, n, returned)
        assert r["final_value"] == scores[(none, s, returned, "hidden_pass")]
    assert sorted(p.relative_to(copy) for p in copy.rglob("*.parquet")) == before
