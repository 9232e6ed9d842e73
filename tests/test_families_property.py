"""The three executors of the stopping families agree: live Stopper == reference replay == DuckDB.

Hypothesis draws small stores (drafts from a pool with repeats, case/punctuation
variants, empty drafts, near-identical embeddings, critiques, contexts, token
counts, judgments) and family policies with drawn parameters; every store goes
through the real Parquet -> DuckDB path (``analysis.connect``), the reference
executor (:func:`shp_ray.policy.reference.replay` over :func:`shp_ray.generation.records.load_trajectories`)
and the live :class:`shp_ray.Stopper` fed round by round with the same encoder. Each draft's extracted answer
is drawn too (a few answers, repeats, None: a draft that states none), stored in ``draft_answers`` and handed to the
Stopper as its extractor's reading, so the answer-based families are held equal on random answer trajectories; and
each draft's token log-probabilities (a few values, or None: the provider returned none), summarised into
``draft_logprobs`` and handed to the Stopper as the provider's list, for the token-confidence family.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis
from analysis.stats import gain_fit
from shp_ray import Stopper
from shp_ray.generation.records import load_trajectories
from shp_ray.policy.families.signals import SignalState
from shp_ray.policy.logprobs import DEFAULT_LAST_K, STATS, summarise
from shp_ray.policy.reference import replay
from shp_ray.policy.table import Policy, policy_by_name, with_params
from storage.answers_schema import DRAFT_ANSWERS
from storage.logprobs_schema import DRAFT_LOGPROBS
from storage.parts import Store
from storage.schemas import feedback_embeddings_schema, rounds_schema

DIM = 8
EMBEDDER = "test-encoder (hash vectors, not a language model)"
DRAFTS = ["Paris", "paris.", "PARIS!", "Paris is the capital", "London", "Lyon", "", "Rome, Italy", "the answer: Paris"]
FEEDBACK = ["", "APPROVED", "Add the country.", "Be shorter.", "add the country"]
CONTEXTS = [["Paris is the capital of France."], ["Rome is in Italy.", "London is large."], []]
ANSWERS = ["paris", "london", "rome", None]  # extracted answers; None: the draft states none
LOGPROBS = [-2.0, -0.5, -0.2, -0.1, -0.05, 0.0]  # token log-probabilities (a threshold's own values among them)


def base_vector(text: str) -> np.ndarray:
    seed = int(hashlib.sha256(text.casefold().strip(" .!").encode()).hexdigest()[:8], 16)
    return np.random.default_rng(seed).normal(size=DIM)


def make_encoder(noise: float):
    """Text -> vector; case/punctuation variants land close (distance ~ noise), empty -> zero vector."""

    def encode(texts: list[str]) -> np.ndarray:
        rows = []
        for t in texts:
            if not t.strip():
                rows.append(np.zeros(DIM, np.float32))
                continue
            jitter = np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=DIM)
            v = base_vector(t) + noise * jitter
            rows.append((v / np.linalg.norm(v)).astype(np.float32))
        return np.stack(rows)

    return encode


def _fitted_model_json() -> str:
    rng = np.random.default_rng(0)
    hists, scores = [], []
    for _ in range(6):
        st_ = SignalState()
        for t in range(5):
            st_.push(f"d{t} " * (t + 1), rng.normal(size=DIM), rng.normal(size=DIM) if t else None, 10)
        hists.append(st_.history)
        scores.append(list(rng.uniform(0, 1, size=5)))
    return gain_fit.fit(hists, scores, n_components=2).to_json()


MODEL = _fitted_model_json()


@st.composite
def family_policy(draw: st.DrawFn, i: int, only: tuple[str, ...] = ()) -> Policy:
    T = draw(st.integers(3, 6) | st.integers(1, 6))
    from dataclasses import replace

    from shp_ray.policy.cascade import HaltConfig

    names = [
        "sim_threshold@threshold={thr},n={n}",
        "window_mean@threshold={eps},n={n}",
        "dynamic_threshold@start={thr},end=0.99,n={n}",
        "drift@tol={eps},n={n}",
        "consensus@threshold={thr},n={n}",
        "gain_model@c={c}",
        "verifier",
        "oscillation@cycle={n},history={h}",
        "budget@budget={b},cycle={n}",
        "best_medoid",
        "best_grounded",
        "best_verified",
        "sim_threshold+best=medoid@threshold={thr}",
        "window_mean+best=grounded@threshold={eps}",
        "answer_stable@w={w}",
        "answer_runlength@r={w}",
        "adaptive_consistency@threshold={act},prior={prior}",
        "sprt@p0={p0},p1={p1},alpha={alpha},beta={beta}",
        "answer_stable+best=medoid@w={w}",
        "confidence@stat={stat},threshold={cthr}",
        "confidence+best=grounded@stat={stat},threshold={cthr}",
    ]
    if only:
        names = [n for n in names if n.startswith(only)]
    name = draw(st.sampled_from(names)).format(
        thr=draw(st.sampled_from([0.0, 0.9, 0.99, 0.999, 1.0])),
        eps=draw(st.sampled_from([0.0, 0.001, 0.05, 0.5, 1.0, 2.0])),
        n=draw(st.integers(1, 3)),
        h=draw(st.integers(3, 10)),
        c=draw(st.sampled_from([-1.0, 0.0, 0.1, 1.0])),
        b=draw(st.integers(1, 200)),
        w=draw(st.integers(2, 4)),
        act=draw(st.sampled_from([0.6, 0.75, 0.8125, 0.9, 0.95, 0.99])),  # 0.75, 0.8125: P exactly at a count
        prior=draw(st.sampled_from([0.5, 1.0, 2.0])),
        p0=draw(st.sampled_from([0.2, 0.5])),
        p1=draw(st.sampled_from([0.6, 0.9])),
        alpha=draw(st.sampled_from([0.05, 0.1, 0.3])),
        beta=draw(st.sampled_from([0.05, 0.2, 0.4])),
        stat=draw(st.sampled_from(STATS)),
        cthr=draw(st.sampled_from([-1.0, -0.2, -0.1, -0.05, 0.0])),
    )
    p = policy_by_name(name, replace(HaltConfig(), max_rounds=T))
    if p.kind == "gain_model" and draw(st.booleans()):
        p = with_params(p, model=MODEL)
    return replace(p, name=f"p{i}:{name}")


@st.composite
def cases(draw: st.DrawFn, only: tuple[str, ...] = ()):
    n = draw(st.integers(1, 3))
    trajs = []
    for i in range(n):
        depth = draw(st.integers(3, 6) | st.integers(1, 6))
        pool = draw(st.lists(st.sampled_from(DRAFTS), min_size=1, max_size=4))  # few texts: repeats, cycles
        drafts = [draw(st.sampled_from(pool)) for _ in range(depth)]
        fbs = [draw(st.sampled_from(FEEDBACK)) for _ in range(depth - 1)] + [""]
        tokens = [(draw(st.integers(0, 90)), draw(st.integers(0, 90)) if t < depth - 1 else 0) for t in range(depth)]
        metrics = [draw(st.sampled_from([0.1, 0.5, 0.9, math.nan])) for _ in range(depth)]
        said = draw(st.lists(st.sampled_from(ANSWERS), min_size=1, max_size=3))  # few answers: runs, ties
        answers = [draw(st.sampled_from(said)) for _ in range(depth)]
        lps = [draw(st.lists(st.sampled_from(LOGPROBS), min_size=1, max_size=20)) for _ in range(depth)]
        lps = [lp if draw(st.sampled_from([True, True, True, False])) else None for lp in lps]  # None: none returned
        trajs.append((f"s{i}", drafts, fbs, tokens, metrics, draw(st.sampled_from(CONTEXTS)), answers, lps))
    pols = [draw(family_policy(i, only)) for i in range(draw(st.integers(1, 4)))]
    return trajs, pols, draw(st.sampled_from([0.0, 0.001, 0.05, 0.5]))


def write_store(root: str, trajs, encode) -> None:
    store, now = Store(root), datetime.now(UTC)
    store.write(
        "generations",
        pa.Table.from_pylist(
            [{"gen_id": "g", "model": "m", "prompt_version": "v", "max_rounds": 6, "temperature": 0.0, "seed": 0,
              "embedder": EMBEDDER, "embedding_dim": DIM, "config_json": "{}", "created_at": now}]
        ),
    )  # fmt: skip
    scen, rounds, judg, fb_texts, said, sure = [], [], [], {}, [], []
    for sid, drafts, fbs, tokens, metrics, ctx, *stated in trajs:
        said += [{"gen_id": "g", "scenario_id": sid, "round": t, "extractor": "qa-lenient-v1", "answer": a,
                  "error": None} for t, a in enumerate(stated[0] if stated else [], start=1)]  # fmt: skip
        for t, lps in enumerate(stated[1] if len(stated) > 1 else [], start=1):
            if (summary := summarise(lps, DEFAULT_LAST_K)) is not None:
                sure.append({"gen_id": "g", "scenario_id": sid, "round": t, "tokens": len(lps), "k": DEFAULT_LAST_K,
                             **summary})  # fmt: skip
        scen.append({"scenario_id": sid, "dataset": "t", "split": "test", "question": "q?", "contexts": ctx,
                     "ground_truth": "", "references": [], "meta_json": "{}"})  # fmt: skip
        embs = encode(drafts)
        for t, (d, fb, (w, c), m) in enumerate(zip(drafts, fbs, tokens, metrics, strict=True), start=1):
            h = hashlib.sha256(f"{sid}:{d}".encode()).hexdigest()
            rounds.append({"gen_id": "g", "scenario_id": sid, "round": t, "draft": d, "feedback": fb, "draft_hash": h,
                           "writer_prompt_tokens": w, "writer_completion_tokens": 0, "critic_prompt_tokens": c,
                           "critic_completion_tokens": 0, "writer_latency_s": 0.0, "critic_latency_s": 0.0,
                           "embedding": embs[t - 1]})  # fmt: skip
            if fb.strip():
                fb_texts[hashlib.sha256(fb.encode()).hexdigest()] = fb
            if any(j["draft_hash"] == h for j in judg):
                continue  # one judgment per draft, as the store keys them
            judg.append({"judge_key": h, "judge": "j", "judge_prompt_version": "v", "scenario_id": sid,
                         "draft_hash": h, "faithfulness": m, "answer_relevancy": m, "context_precision": m,
                         "context_recall": m, "judge_prompt_tokens": 7 * t, "judge_completion_tokens": 0,
                         "error": ""})  # fmt: skip
    store.write("scenarios", pa.Table.from_pylist(scen))
    store.write("rounds", pa.Table.from_pylist(rounds, schema=rounds_schema(DIM)), schema=rounds_schema(DIM))
    store.write("judgments", pa.Table.from_pylist(judg))
    if said:
        store.write("draft_answers", pa.Table.from_pylist(said, schema=DRAFT_ANSWERS), schema=DRAFT_ANSWERS)
    if sure:
        store.write("draft_logprobs", pa.Table.from_pylist(sure, schema=DRAFT_LOGPROBS), schema=DRAFT_LOGPROBS)
    if fb_texts:
        vecs = encode(list(fb_texts.values()))
        fe = pa.table({"embedder": [EMBEDDER] * len(fb_texts), "text_hash": list(fb_texts),
                       "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM)})  # fmt: skip
        store.write("feedback_embeddings", fe, schema=feedback_embeddings_schema(DIM))


def live(policy: Policy, drafts, fbs, tokens, contexts, encode, answers=(), logprobs=()):
    """Feed the Stopper round by round; (tau, reason, selected) or (depth, None, selected) if it never halted.
    ``answers``: what its extractor reads in each draft, round by round; ``logprobs``: each draft's token
    log-probabilities, as a provider returns them."""
    stated, lps = iter(answers), list(logprobs) or [None] * len(drafts)
    s = Stopper(policy, contexts=contexts, encode=encode, answer=lambda draft: next(stated))
    for t, draft in enumerate(drafts):
        prev_fb = fbs[t - 1] if t else None
        spent = tokens[t][0] + (tokens[t - 1][1] if t else 0)
        d = s.observe(draft, prev_fb, tokens=spent, logprobs=lps[t])
        if d.halt:
            return d.round, d.reason, d.selected_round
    return len(drafts), None, d.selected_round


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_live_reference_and_duckdb_agree(case) -> None:
    check_three_executors(case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(only=("answer_", "adaptive_", "sprt")))
def test_answer_families_agree_on_random_answer_trajectories(case) -> None:
    """answer_stable, answer_runlength, adaptive_consistency and sprt alone, on more drawn answer trajectories."""
    check_three_executors(case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(only=("confidence",)))
def test_the_confidence_family_agrees_on_random_logprob_trajectories(case) -> None:
    """confidence (every stat, thresholds at the drawn values themselves) alone, on more drawn log-probabilities."""
    check_three_executors(case)


def check_three_executors(case) -> None:
    trajs, pols, noise = case
    if not all(any(summarise(lp) for lp in traj[7]) for traj in trajs):  # a trajectory without: confidence left out
        pols = [p for p in pols if p.kind != "confidence"]
        if not pols:
            return
    encode = make_encoder(noise)
    with tempfile.TemporaryDirectory() as root:
        write_store(root, trajs, encode)
        con = analysis.connect(root, policies=pols)
        try:
            rows = con.sql(
                "SELECT r.policy, r.scenario_id, r.stop_round, r.reason, r.operational_tokens, r.evaluation_tokens,"
                " r.final_is, f.selected_round, f.outcome, f.verified_final FROM replay r JOIN family_replay f"
                " USING (policy, scenario_id)"
            ).fetchall()
        finally:
            con.close()
        ref = load_trajectories(Store(root), "g", judge="j")
    got = {(r[0], r[1]): r[2:] for r in rows}
    assert len(got) == len(pols) * len(trajs)
    for p in pols:
        for sid, drafts, fbs, tokens, _, ctx, answers, lps in trajs:
            o = replay(p, ref[sid])
            stop, reason, op, ev, fin, sel, outcome, verified = got[(p.name, sid)]
            assert (stop, reason, op, ev) == (o.stop_round, o.reason, o.operational_tokens, o.evaluation_tokens)
            assert (fin is None and math.isnan(o.final_is)) or fin == o.final_is
            if p.kind == "verifier":
                assert outcome == reason and (outcome != "verified" or verified)
            l_tau, l_reason, l_sel = live(p, drafts, fbs, tokens, ctx, encode, answers, lps)
            assert l_tau == stop and l_sel == sel
            if l_reason is None:  # the live loop would go on; the replay ran out of generated rounds
                assert stop == len(drafts) < p.halt.max_rounds and reason in ("failsafe", "cap", "unfitted")
            else:
                assert l_reason == reason


def test_families_are_rows_of_policies_and_replay(tmp_path) -> None:
    encode = make_encoder(0.01)
    trajs = [("s0", ["Paris", "paris.", "Paris"], ["Be shorter.", "APPROVED", ""], [(5, 3), (5, 3), (5, 0)],
              [0.2, 0.4, 0.6], ["Paris is the capital of France."], ["paris"] * 3,
              [[-0.3], [-0.05], None])]  # fmt: skip
    write_store(str(tmp_path), trajs, encode)
    from shp_ray.policy.table import family_policies, standard_policies

    pols = standard_policies() + family_policies()
    con = analysis.connect(str(tmp_path), policies=pols)
    try:
        names = {r[0]: r[1] for r in con.sql("SELECT policy, params_json FROM policies").fetchall()}
        replayed = {r[0] for r in con.sql("SELECT DISTINCT policy FROM replay").fetchall()}
        summary = {r[0] for r in con.sql("SELECT policy FROM policy_summary").fetchall()}
        verdict = con.execute("SELECT outcome, verified_final FROM family_replay WHERE policy = 'verifier'").fetchone()
    finally:
        con.close()
    assert set(names) == replayed == summary == {p.name for p in pols}
    assert names["shp"] == "{}" and '"threshold":0.95' in names["sim_threshold"]
    # "Paris" is verified by the QA check (every content word is in the context) at round 1
    assert verdict == ("verified", True)


def test_answer_families_are_left_out_of_a_store_without_answers(tmp_path, caplog) -> None:
    """No stored answers: the answer-based families are not run (on unknown answers) but left out, in one line."""
    from shp_ray.policy.table import family_policies

    trajs = [("s0", ["Paris", "Paris"], ["Be shorter.", ""], [(5, 3), (5, 0)], [0.2, 0.4], [])]
    write_store(str(tmp_path), trajs, make_encoder(0.01))
    with caplog.at_level("WARNING", logger="analysis.replay.family_replay"):
        con = analysis.connect(str(tmp_path), policies=family_policies())
    try:
        replayed = {r[0] for r in con.sql("SELECT DISTINCT policy FROM replay").fetchall()}
        listed = {r[0] for r in con.sql("SELECT policy FROM policies").fetchall()}
    finally:
        con.close()
    left = {"answer_stable", "answer_runlength", "adaptive_consistency", "sprt", "confidence"}
    assert replayed == listed == {p.name for p in family_policies()} - left
    (line,) = [r.getMessage() for r in caplog.records if "extracted answers" in r.getMessage()]
    assert "left out of the replay" in line and "shp-import --store <store> --rescore g" in line
    with pytest.raises(ValueError, match="none is stored"):
        replay(policy_by_name("sprt"), load_trajectories(Store(str(tmp_path)), "g", judge="j")["s0"])


def test_family_rows_leave_the_cascade_rows_unchanged(tmp_path) -> None:
    from shp_ray.policy.table import family_policies, standard_policies

    encode = make_encoder(0.05)
    trajs = [(f"s{i}", ["Paris", "Lyon", "paris."][: i + 1], ["Add the country.", "Be shorter.", ""][: i + 1],
              [(9, 4)] * (i + 1), [0.3, 0.7, 0.5][: i + 1], [], ["paris", "lyon", "paris"][: i + 1],
              [[-0.4, -0.1], [-0.01], None][: i + 1])
             for i in range(3)]  # fmt: skip
    write_store(str(tmp_path), trajs, encode)
    q = "SELECT * FROM replay WHERE policy IN (SELECT policy FROM policies WHERE params_json = '{}') ORDER BY ALL"
    a = analysis.connect(str(tmp_path), policies=standard_policies())
    b = analysis.connect(str(tmp_path), policies=standard_policies() + family_policies())
    try:
        assert a.sql(q).fetchall() == b.sql(q).fetchall()

        # The same columns; policy's type is each connection's policies.policy (an ENUM of its policy names).
        def types(c, view: str) -> dict[str, str]:
            return {r[0]: r[1] for r in c.sql(f"DESCRIBE {view}").fetchall()}

        described = {c: types(c, "replay") for c in (a, b)}
        for c, columns in described.items():
            assert columns.pop("policy") == types(c, "policies")["policy"]
        assert described[a] == described[b]
        analysis.set_policies(a, family_policies())
        assert a.execute("SELECT count(DISTINCT policy) FROM replay").fetchone()[0] == len(family_policies())
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize(
    "bad",
    ["sim_threshold@n=0", "verifier+best=medoid", "drift@speed=1", "budget@cycle=11", "answer_stable@w=1",
     "answer_runlength@r=0", "adaptive_consistency@threshold=0.4", "adaptive_consistency@prior=0",
     "sprt@p0=0.9,p1=0.5", "sprt@alpha=0.6"],
)  # fmt: skip
def test_bad_family_names_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=bad.split("@")[0].split("+")[0]):
        policy_by_name(bad)
