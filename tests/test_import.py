"""shp-import: a loop's own trajectories into the real store, replayed by the real DuckDB views.

The reference is built from the FILE (its drafts, critiques, token counts and embeddings), not from the store,
so the test holds the whole path (validation, rows, signals, views, replay) equal to
:func:`shp_ray.policy.reference.replay`.
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pyarrow as pa
import pytest

import analysis
from analysis.sql.rows import fetch_dicts
from analysis.stats.scores import compare_scores
from shp_ray.importer.cli import main
from shp_ray.policy.answer import qa_answer
from shp_ray.policy.reference import replay
from shp_ray.policy.scoring import cosine_distance
from shp_ray.policy.table import family_policies, standard_policies
from shp_ray.policy.trajectory import Round, Trajectory
from storage.parts import Store

POLICIES = standard_policies(random_seeds=(0, 7))
N = 50


def _trajectories(seed: int = 5, dim: int = 16) -> list[dict]:
    """50 loops of 1..6 rounds: drafts that converge (so entropy halts), some approved, some answered right."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        depth = int(rng.integers(1, 7))
        base = rng.normal(size=dim)
        noise = float(rng.choice([0.02, 0.1, 1.0]))
        rounds = []
        for t in range(1, depth + 1):
            vec = base + rng.normal(size=dim) * noise / t
            approve = t < depth and rng.random() < 0.15
            right = rng.random() < 0.5
            rounds.append(
                {
                    "draft": f"Draft {t} of task {i}.\nAnswer: {'Paris' if right else 'Lyon'}",
                    "feedback": "" if t == depth else ("APPROVED." if approve else f"Revise round {t}."),
                    "tokens": {
                        "writer_prompt": int(rng.integers(50, 200)),
                        "writer_completion": int(rng.integers(10, 80)),
                        "critic_prompt": 0 if t == depth else int(rng.integers(60, 220)),
                        "critic_completion": 0 if t == depth else int(rng.integers(5, 40)),
                    },
                    "scores": {"pass": float(right)},
                    "embedding": [round(float(x), 6) for x in vec],
                }
            )
        out.append({"id": f"task-{i:02d}", "question": f"Where is thing {i}?", "answers": ["Paris"], "rounds": rounds,
                    "team": "blue" if i % 2 else "red"})  # fmt: skip
    return out


def _write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _reference(rows: list[dict]) -> dict[str, Trajectory]:
    out = {}
    for row in rows:
        built, prev = [], None
        for t, r in enumerate(row["rounds"], start=1):
            emb = np.asarray(r["embedding"], dtype=np.float32)
            tok = r["tokens"]
            built.append(
                Round(
                    round=t,
                    distance=math.nan if prev is None else cosine_distance(emb, prev),
                    feedback=r["feedback"],
                    writer_tokens=tok["writer_prompt"] + tok["writer_completion"],
                    critic_tokens=tok["critic_prompt"] + tok["critic_completion"],
                    draft=r["draft"],
                    embedding=emb,
                )
            )
            prev = emb
        # the answer each draft states, as the import stores it (the task's own reading: the lenient QA answer)
        answers = [qa_answer(r["draft"]) for r in row["rounds"]]
        out[row["id"]] = Trajectory(row["id"], tuple(built), meta={"answers": answers})
    return out


def _parts(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("import")
    rows = _trajectories()
    path = _write(folder / "traces.jsonl", rows)
    store = folder / "store"
    assert main([path, "--store", str(store), "--score", "hotpot"]) == 0
    return rows, path, store


def test_replay_of_an_import_equals_the_reference_replay_over_the_file(imported, capsys) -> None:
    rows, _, store = imported
    ref = _reference(rows)
    con = analysis.connect(store, policies=POLICIES)
    try:
        got = con.sql(
            "SELECT policy, scenario_id, stop_round, reason, operational_tokens FROM replay ORDER BY ALL"
        ).fetchall()
        kinds = con.sql("SELECT DISTINCT dataset FROM scenarios").fetchall()
    finally:
        con.close()
    assert len(got) == N * len(POLICIES) and kinds == [("imported",)]
    named = {p.name: p for p in POLICIES}
    mismatches = []
    for name, sid, tau, reason, op in got:
        want = replay(named[name], ref[sid])
        if (tau, reason, op) != (want.stop_round, want.reason, want.operational_tokens):
            mismatches.append((name, sid, (tau, reason, op), want))
    assert not mismatches, mismatches[:3]
    assert {"critic", "entropy", "failsafe"} <= {r for _, _, _, r, _ in got}  # the comparison covered them


def test_the_families_replay_an_import_too(imported) -> None:
    rows, _, store = imported
    from shp_ray.policy.families.registry import needs_logprobs

    ref = _reference(rows)
    pols = [p for p in family_policies() if not needs_logprobs(p.kind)]  # an import carries no log-probabilities
    con = analysis.connect(store, policies=pols)
    try:
        got = con.sql("SELECT policy, scenario_id, stop_round, reason FROM replay").fetchall()
    finally:
        con.close()
    named = {p.name: p for p in pols}
    assert len(got) == N * len(pols)
    outcomes = [(tau, reason, replay(named[n], ref[s])) for n, s, tau, reason in got]
    assert all((tau, reason) == (o.stop_round, o.reason) for tau, reason, o in outcomes)


def test_importing_the_same_file_again_adds_nothing(imported, capsys) -> None:
    _, path, store = imported
    before = _parts(store)
    assert main([path, "--store", str(store)]) == 0
    assert "nothing added" in capsys.readouterr().out
    assert _parts(store) == before
    gens = Store(store).read("generations").to_pylist()
    assert len(gens) == 1 and json.loads(gens[0]["config_json"])["kind"] == "imported"
    assert json.loads(gens[0]["config_json"])["source"].endswith("traces.jsonl")


def test_the_report_and_shp_query_read_an_import(imported, tmp_path, capsys) -> None:
    from analysis.query import main as query
    from analysis.report import write_report

    _, _, store = imported
    md = write_report(store, tmp_path / "out", n_resamples=100).read_text()
    assert "fixed_k1" in md and "imported" in md
    assert query(["--store", str(store), "SELECT count(*) AS n FROM replay WHERE policy = 'shp'"]) == 0
    assert capsys.readouterr().out.split() == ["n", "--", str(N), "(1", "row)"]


def test_scores_of_the_file_and_of_a_scorer_appear_at_each_stop_with_paired_differences(imported) -> None:
    rows, _, store = imported
    con = analysis.connect(store, policies=POLICIES)
    try:
        names = {s for (s,) in con.sql("SELECT DISTINCT score FROM score_summary").fetchall()}
        k1 = con.execute(
            "SELECT mean_value, mean_baseline_value, delta, n_paired, share_failed FROM score_summary"
            " WHERE policy = 'fixed_k1' AND score = 'pass'"
        ).fetchone()
        oracle = con.execute(
            "SELECT mean_value FROM score_summary WHERE policy = 'oracle_pass' AND score = 'pass'"
        ).fetchone()
        stats = {(r["policy"], r["score"]): r for r in compare_scores(con, n_resamples=200)}
    finally:
        con.close()
    assert {"pass", "em", "f1"} <= names
    first = [float(r["rounds"][0]["scores"]["pass"]) for r in rows]
    last = [float(r["rounds"][-1]["scores"]["pass"]) for r in rows]
    assert k1[:2] == pytest.approx((np.mean(first), np.mean(last)))
    assert k1[2] == pytest.approx(np.mean(np.subtract(first, last))) and k1[3] == N and k1[4] == 0.0
    best = [max(x["scores"]["pass"] for x in r["rounds"]) for r in rows]
    assert oracle[0] == pytest.approx(np.mean(best))
    s = stats[("fixed_k1", "pass")]
    assert s["n"] == N and s["mean_diff"] == pytest.approx(k1[2]) and 0.0 <= s["p_t"] <= 1.0 and "p_t_holm" in s


def test_a_malformed_line_names_file_and_line_and_writes_nothing(tmp_path, capsys) -> None:
    rows = _trajectories()[:5]
    text = "".join(json.dumps(r) + "\n" for r in rows).splitlines()
    text[3] = text[3][:40]  # line 4 cut short
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(text) + "\n")
    store = tmp_path / "store"
    assert main([str(path), "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"shp-import: {path}:4: not JSON") and "\n" not in err
    assert not store.exists() or not _parts(store)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r.pop("id"), ":2: id is missing"),
        (lambda r: r["rounds"][0].pop("draft"), ":2: rounds[0].draft is missing"),
        (lambda r: r["rounds"][0]["tokens"].update(writer_prompt=-1), "tokens.writer_prompt must be an integer >= 0"),
        (lambda r: [x.update(embedding=[1.0, 2.0]) for x in r["rounds"]], ":2: embedding size 2 differs from size 16"),
        (lambda r: r["rounds"][0].update(embedding=[1.0, 2.0]), ":2: rounds' embeddings have different sizes [2, 16]"),
        (lambda r: r.update(id="task-00"), ":2: duplicate id 'task-00' (first on line 1)"),
        (lambda r: r["rounds"][0].update(feedbak="x"), ":2: rounds[0] has unknown key(s) ['feedbak']"),
        # a count no call has, which no reader's INT64 sum could hold (2^64 is not even an INT64)
        (lambda r: r["rounds"][0]["tokens"].update(writer_prompt=2**64), "tokens.writer_prompt must be at most"),
        (
            lambda r: r["rounds"][-1]["tokens"].update(critic_completion=2**62),
            "tokens.critic_completion must be at most",
        ),
        (
            lambda r: r["rounds"][0].update(draft="x \ud800 y"),
            ":2: text UTF-8 cannot encode (a lone surrogate) in rounds[0].draft",
        ),
    ],
)
def test_a_bad_trajectory_is_one_line_naming_where(tmp_path, capsys, change, says) -> None:
    rows = _trajectories()[:3]
    change(rows[1])
    path = _write(tmp_path / "bad.jsonl", rows)
    assert main([path, "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    assert not (tmp_path / "store").exists() or not _parts(tmp_path / "store")


def test_valid_json_lines_holding_line_separators_in_strings_import(tmp_path, capsys) -> None:
    """U+2028 and U+0085 inside a JSON string are the string's: the file is split on newlines only."""
    rows = _trajectories()[:2]
    rows[0]["rounds"][0]["draft"] += " \u2028 and \x85 end"
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main([str(path), "--store", str(tmp_path / "store")]) == 0, capsys.readouterr().err
    drafts = Store(tmp_path / "store").read("rounds", columns=["draft"])["draft"].to_pylist()
    assert rows[0]["rounds"][0]["draft"] in drafts


def test_a_write_that_fails_leaves_no_part_behind(tmp_path, monkeypatch, capsys) -> None:
    path = _write(tmp_path / "t.jsonl", _trajectories()[:4])
    store = tmp_path / "store"
    real = Store.write

    def failing(self, name, table, schema=None):  # the disk fills up at the last table
        if name == "generations":
            raise OSError(28, "No space left on device")
        return real(self, name, table, schema)

    monkeypatch.setattr(Store, "write", failing)
    assert main([path, "--store", str(store)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert _parts(store) == []
    monkeypatch.undo()
    assert main([path, "--store", str(store)]) == 0  # and the import then goes through whole
    assert "imported 4 trajectories" in capsys.readouterr().out


def test_a_python_scorer_that_raises_records_the_round_and_goes_on(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "flaky_scorer.py").write_text(
        "def score(task, draft):\n"
        "    if 'round 2' in draft:\n"
        "        raise ValueError('cannot parse')\n"
        "    return {'length': float(len(draft)), 'named': float(task.answers[0] in draft)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = [{"id": f"t{i}", "answers": "Paris", "rounds": [{"draft": f"round {t}: Paris", "embedding": [1.0, t, 0.5]}
             for t in (1, 2, 3)]} for i in range(4)]  # fmt: skip
    path = _write(tmp_path / "t.jsonl", rows)
    store = tmp_path / "store"
    assert main([path, "--store", str(store), "--score", "python:flaky_scorer:score"]) == 0
    out = capsys.readouterr().out
    assert "score length: 12 rounds scored, 4 failed (33.3%)" in out
    scenarios = Store(store).read("scenarios")  # t0 and t1 stored under dev too: a split of their own, 'dev+test'
    Store(store).write("scenarios", scenarios.slice(0, 2).set_column(2, "split", pa.array(["dev", "dev"])))
    con = analysis.connect(store)
    try:
        share = con.sql("SELECT DISTINCT share_failed FROM score_summary WHERE score = 'named'").fetchall()
        errors = con.sql("SELECT DISTINCT round, error FROM scores WHERE error IS NOT NULL").fetchall()
        summary = fetch_dicts(con, "SELECT split, policy, scores FROM policy_summary")
        per_score = fetch_dicts(con, "SELECT * FROM score_summary")
        shp = con.sql("SELECT split, scores['named'].delta FROM policy_summary WHERE policy = 'shp'").fetchall()
        wide = con.execute(  # replay_score_map: replay_scores' values, one map per replay row
            "SELECT count(*), count(*) FILTER (WHERE m.scores['named'].final IS NOT DISTINCT FROM s.final_value"
            " AND m.scores['named'].baseline IS NOT DISTINCT FROM s.baseline_value), count(DISTINCT m.policy)"
            " FROM replay_score_map m JOIN replay_scores s USING (policy, gen_id, scenario_id) WHERE s.score = 'named'"
        ).fetchone()
        ((n_replay,),) = con.execute("SELECT count(DISTINCT policy) FROM replay").fetchall()
    finally:
        con.close()
    assert share == [(pytest.approx(1 / 3),)] and errors == [(2, "ValueError: cannot parse")]
    # policy_summary's scores map: score_summary's row of the same split and policy, for every score
    want = {(r["split"], r["policy"], r["score"]): r for r in per_score}
    assert {r["split"] for r in summary} == {"dev+test", "test"} and len(shp) == 2
    for row in summary:
        assert set(row["scores"]) == {"length", "named"}
        for name, got in row["scores"].items():
            w = want[(row["split"], row["policy"], name)]
            assert got == {"mean": w["mean_value"], "baseline": w["mean_baseline_value"], "delta": w["delta"],
                           "delta_lower95": w["delta_lower95"], "n_paired": w["n_paired"],
                           "non_inferior": w["non_inferior"], "share_failed": w["share_failed"],
                           "tost_power": w["tost_power"], "n_needed": w["n_needed"], "degenerate": w["degenerate"],
                           "underpowered": w["underpowered"]}  # fmt: skip
    assert sum(r["scores"]["length"]["n_paired"] for r in summary if r["policy"] == "fixed_k3") == 4
    assert wide[0] == wide[1] == 4 * wide[2] and wide[2] == n_replay + 2  # + oracle_length, oracle_named
    sys.modules.pop("flaky_scorer", None)


def test_rescore_computes_scores_of_a_stored_generation_without_a_model(imported, tmp_path, capsys) -> None:
    rows, path, _ = imported
    store = tmp_path / "store"
    assert main([path, "--store", str(store)]) == 0
    gen_id = Store(store).read("generations").column("gen_id")[0].as_py()
    capsys.readouterr()
    pattern = r"Answer: (?P<answer>\w+)"
    # the 8 digits a report prints name the generation; a prefix of none is one line and exit 2
    assert main(["--rescore", gen_id[:8], "--store", str(store), "--score", f"regex:{pattern}"]) == 0
    assert f"scored generation {gen_id}" in capsys.readouterr().out
    assert main(["--rescore", gen_id, "--store", str(store), "--score", f"regex:{pattern}"]) == 0
    assert "0 new score rows" in capsys.readouterr().out  # what is stored is not scored twice
    other = "0" if gen_id[0] != "0" else "1"
    assert main(["--rescore", other * 8, "--store", str(store), "--score", "hotpot"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"shp-import: no generation {other * 8!r} in {Store(store).uri} (stored: {gen_id[:12]})", err
    con = analysis.connect(store)
    try:
        (got,) = con.execute("SELECT avg(value) FROM scores WHERE score = 'regex'").fetchone()
    finally:
        con.close()
    passes = [r["scores"]["pass"] for row in rows for r in row["rounds"]]
    assert got == pytest.approx(np.mean(passes))


def test_the_docs_example_prints_what_the_page_says(tmp_path, monkeypatch, capsys) -> None:
    """docs/your-loop-scores-import.md: its commands, run here with the real MiniLM embedder, print its lines."""
    from pathlib import Path

    from analysis.query import main as query

    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "your-loop-scores-import.md").read_text()
    monkeypatch.chdir(root / "docs" / "examples" / "your-loop")
    monkeypatch.syspath_prepend(".")
    store = str(tmp_path / "your-loop")
    runs = [
        ["import_traces.jsonl", "--store", store, "--score", "python:loop_scorer:score", "--score", "hotpot"],
        ["import_traces.jsonl", "--store", store],
        ["import_chat.jsonl", "--format", "openai-chat", "--store", store, "--score", "python:loop_scorer:score"],
    ]
    for argv in runs:
        assert main(argv) == 0
        assert ("$ PYTHONPATH=. shp-import " + " ".join(argv).replace(store, "/tmp/your-loop")) in page
    printed = capsys.readouterr().out.replace(store, "/tmp/your-loop").splitlines()
    for sql in page.split('$ shp-query --store /tmp/your-loop "')[1:]:
        assert query(["--store", store, " ".join(sql.split('"\n', 1)[0].split())]) == 0
        printed += capsys.readouterr().out.splitlines()
    missing = [line for line in printed if line not in page]
    assert not missing, missing
    sys.modules.pop("loop_scorer", None)


def test_parquet_and_openai_chat_files_replay_like_the_jsonl_they_hold(imported, tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, _, _ = imported
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet")
    chat = []
    for row in rows[:10]:
        calls = []
        for r in row["rounds"]:
            tok = r["tokens"]
            for agent, text in (("writer", r["draft"]), ("critic", r["feedback"])):
                usage = {"prompt_tokens": tok[f"{agent}_prompt"], "completion_tokens": tok[f"{agent}_completion"]}
                reply = {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage}
                calls.append({"agent": agent, "request": {"messages": [{"role": "user", "content": "q"}]},
                              "response": reply})  # fmt: skip
        chat.append({"id": row["id"], "answers": row["answers"], "calls": calls[:-1]})  # no critic after the last
    ref = _reference(rows)
    for fmt, path, n in (("parquet", tmp_path / "t.parquet", N), ("openai-chat", tmp_path / "c.jsonl", 10)):
        if fmt == "openai-chat":
            _write(path, chat)  # no embeddings in a chat log: computed (fake-hash), so entropy stops differ
        store = tmp_path / f"store-{fmt}"
        assert main([str(path), "--store", str(store), "--format", fmt, "--embedder", "fake-hash"]) == 0
        con = analysis.connect(store, policies=POLICIES)
        try:
            got = con.sql("SELECT policy, scenario_id, stop_round, reason, operational_tokens FROM replay").fetchall()
        finally:
            con.close()
        assert len(got) == n * len(POLICIES)
        named = {p.name: p for p in POLICIES}
        for name, sid, tau, reason, op in got:
            want = replay(named[name], ref[sid])
            if fmt == "parquet" or not named[name].halt.entropy:
                assert (tau, reason, op) == (want.stop_round, want.reason, want.operational_tokens), (fmt, name, sid)


def test_a_generation_id_prefix_names_one_generation_or_says_why(tmp_path) -> None:
    from datetime import UTC, datetime

    import pyarrow as pa

    from storage.parts import StoreError
    from storage.resume import full_gen_id
    from storage.schemas import GENERATIONS

    ids = ["55a9e1f4" + "0" * 56, "55a9e1f4" + "1" * 56, "7c" + "2" * 62]
    row = {"model": "m", "prompt_version": "p", "max_rounds": 2, "temperature": 0.0, "seed": 0, "embedder": "e"}
    row |= {"embedding_dim": 4, "config_json": "{}", "created_at": datetime.now(UTC)}
    store = Store(tmp_path / "store")
    store.write("generations", pa.Table.from_pylist([{**row, "gen_id": g} for g in ids], schema=GENERATIONS))
    assert full_gen_id(store, "7c") == ids[2] and full_gen_id(store, ids[0]) == ids[0]
    assert full_gen_id(store, "55a9e1f40") == ids[0]
    with pytest.raises(StoreError) as err:
        full_gen_id(store, "55a9e1f4")
    assert str(err.value) == (
        f"generation id '55a9e1f4' is ambiguous in {store.uri}: 2 match (55a9e1f40000, 55a9e1f41111); give more digits"
    )
    with pytest.raises(StoreError, match=r"^no generation 'ff' in .* \(stored: 55a9e1f40000, 55a9e1f41111, 7c22"):
        full_gen_id(store, "ff")
