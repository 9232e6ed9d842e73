"""The SQL of the DuckDB layer: views over the store, signals, and the replay.

Everything here returns SQL text, so the Python connection (:mod:`analysis.db`)
and the plain DuckDB CLI init script (``<store>/views.sql``) run the SAME
statements and cannot drift apart.

Pipeline (one scan of the store, then pure arithmetic per policy)::

    round_parts (Parquet) --+--> round_signals (d_t, IS_t, tokens; materialised once)
    judgments (Parquet) ----+          |
                                       v
                   trajectories (one row per gen_id, scenario_id; lists over rounds)
                                       |  x  policies (one row per policy / cell)
                                       v
                   replay (stop_round, reason, tokens, final_is) --> policy_summary

The cascade in ``replay`` is :func:`shp_ray.policy.cascade.decide` written as one
list lambda per (policy, trajectory): for every round t <= cap it yields
``t*8 + reason_code`` when the cascade halts at t (codes in REASON_CODES, in
the cascade's priority order) and NULL otherwise; the smallest value is the
first halting round and its reason. Property tests hold it equal to the
reference executor :func:`shp_ray.policy.reference.replay`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scipy import stats as _st

from shp_ray.policy.scoring import METRICS, check_weights

REASON_CODES = {1: "critic", 2: "entropy", 3: "no_gain", 4: "failsafe"}

# Python's str.isspace() characters: approved() strips them before matching.
_PY_SPACE = (
    r"\t\n\x{0b}\x{0c}\r\x{1c}-\x{1f} \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
)
APPROVED_REGEX = rf"^[{_PY_SPACE}]*(?i:approved)"

# One-sided 95% t quantiles for the SQL non-inferiority check: exact (scipy) up to
# df = 300, a Cornish-Fisher expansion beyond (error < 1e-9), so the plain DuckDB
# CLI computes the same ``non_inferior`` as the Python connection.
_T_TABLE_MAX_DF = 300
_Z95 = 1.6448536269514722


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def double(value: float) -> str:
    """An exact DOUBLE literal (a bare 0.1 would parse as DECIMAL)."""
    return f"{quote(repr(float(value)))}::DOUBLE"


def is_expression(weights: Mapping[str, float], prefix: str = "") -> str:
    """IS under ``weights``, summed in METRICS order like scoring.information_score.

    NULL when a positively weighted metric is NaN or missing (never 0), clipped to [0, 1].
    """
    w = check_weights(weights)
    terms = [(m, wm) for m, wm in w.items() if wm != 0.0]
    total = "0.0::DOUBLE" + "".join(f" + {double(wm)} * {prefix}{m}" for m, wm in terms)
    unknown = " OR ".join(f"{prefix}{m} IS NULL OR isnan({prefix}{m})" for m, _ in terms) or "false"
    return f"CASE WHEN {unknown} THEN NULL ELSE least(1.0, greatest(0.0, {total})) END"


def read_parquet(glob: str) -> str:
    return f"read_parquet({quote(glob)}, union_by_name = true)"


def empty_select(schema_fields: Sequence[tuple[str, str]]) -> str:
    """A typed empty relation for a table with no parts yet."""
    cols = ", ".join(f"NULL::{sqltype} AS {name}" for name, sqltype in schema_fields)
    return f"SELECT {cols} WHERE false"


def round_signals_sql(dim: int, judge_where: str, weights: Mapping[str, float]) -> str:
    """Per generated round: d_t (DuckDB array cosine distance), IS_t, tokens, f_t.

    d_t is NULL at round 1, 1.0 when either embedding has zero (or non-finite)
    norm, else clipped to [0, 2] -- shp_ray.policy.scoring.cosine_distance's contract.
    """
    metrics = ", ".join(f"j.{m}" for m in METRICS)
    return f"""
WITH r AS (
    SELECT gen_id, scenario_id, round, feedback, draft_hash,
           writer_prompt_tokens + writer_completion_tokens AS writer_tokens,
           critic_prompt_tokens + critic_completion_tokens AS critic_tokens,
           embedding::FLOAT[{dim}] AS e
    FROM round_parts
), paired AS (
    SELECT * EXCLUDE (e, e_prev), array_cosine_distance(e, e_prev)::DOUBLE AS cos_d
    FROM (SELECT r.*, lag(e) OVER (PARTITION BY gen_id, scenario_id ORDER BY round) AS e_prev FROM r)
), j AS (
    SELECT scenario_id, draft_hash, judge, {", ".join(METRICS)},
           judge_prompt_tokens + judge_completion_tokens AS judge_tokens
    FROM judgments_raw
    WHERE {judge_where}
    QUALIFY row_number() OVER (PARTITION BY scenario_id, draft_hash ORDER BY judge_key) = 1
)
SELECT p.gen_id, p.scenario_id, p.round, p.draft_hash, p.feedback,
       CASE
           WHEN p.cos_d IS NULL THEN NULL  -- round 1: no previous draft
           -- a zero-norm (or non-finite) vector makes the cosine NaN: no evidence, 1.0
           WHEN isnan(p.cos_d) OR NOT isfinite(p.cos_d) THEN 1.0::DOUBLE
           ELSE least(2.0, greatest(0.0, p.cos_d))
       END AS distance,
       {is_expression(weights, "j.")} AS is_score,
       {metrics},
       p.writer_tokens, p.critic_tokens, coalesce(j.judge_tokens, 0) AS judge_tokens,
       j.judge
FROM paired p
LEFT JOIN j ON j.scenario_id = p.scenario_id AND j.draft_hash = p.draft_hash
"""


def trajectories_sql(signals: str = "round_signals") -> str:
    """One row per trajectory with per-round lists (index t = round t).

    ``d_inf``: d_t with NULL/NaN (and round 1) as +inf, so "all of the last k
    below eps" is ``list_max(...) < eps`` and a missing distance never halts.
    ``s``: IS_t with NaN as NULL (a NULL difference never shows "no gain").
    ``a``: approved(f_t); the cascade at round t reads a[t-1].
    ``cw``/``cc``/``cj``: cumulative writer / critic / judge tokens.
    """
    return f"""
WITH x AS (
    SELECT gen_id, scenario_id, round,
           CASE WHEN distance IS NULL OR isnan(distance) OR round = 1 THEN 'inf'::DOUBLE
                ELSE distance::DOUBLE END AS d_inf,
           CASE WHEN isnan(is_score) THEN NULL ELSE is_score::DOUBLE END AS s,
           coalesce(feedback, '') AS fb,
           regexp_matches(coalesce(feedback, ''), {quote(APPROVED_REGEX)}) AS a,
           sum(writer_tokens) OVER w AS cw,
           sum(critic_tokens) OVER w AS cc,
           sum(judge_tokens) OVER w AS cj,
           judge_tokens AS j
    FROM {signals}
    WINDOW w AS (PARTITION BY gen_id, scenario_id ORDER BY round ROWS UNBOUNDED PRECEDING)
)
SELECT *,
       -- critic: the first round t >= 2 whose previous critique approved (policy-independent)
       list_position(a, true) + 1 AS crit,
       -- entropy: mk[k][t] = max of d over rounds t-k+1..t, +inf while t <= k (fewer than k distances)
       list_transform(range(1, depth), lambda kk: list_transform(range(1, depth + 1), lambda t:
           CASE WHEN t > kk THEN list_max(d_inf[t - kk + 1 : t]) ELSE 'inf'::DOUBLE END)) AS mk,
       -- no_gain: gw[w][t] = IS_t - IS_(t-1) for t >= max(w, 2), else NULL (NULL also when either is unknown)
       list_transform(range(1, depth + 1), lambda w: list_transform(range(1, depth + 1), lambda t:
           CASE WHEN t >= greatest(w, 2) THEN s[t] - s[t - 1] END)) AS gw,
       -- the baseline fixed_k(depth): every round's writer, every critic but the last, no judge
       cw[depth] + coalesce(cc[depth - 1], 0) AS baseline_tokens, s[depth] AS baseline_is
FROM (
    SELECT gen_id, scenario_id, count(*)::INTEGER AS depth,
           list(d_inf ORDER BY round) AS d_inf, list(s ORDER BY round) AS s,
           list(fb ORDER BY round) AS fb, list(a ORDER BY round) AS a,
           list(cw::BIGINT ORDER BY round) AS cw, list(cc::BIGINT ORDER BY round) AS cc,
           list(cj::BIGINT ORDER BY round) AS cj, list(j::BIGINT ORDER BY round) AS j
    FROM x
    GROUP BY gen_id, scenario_id
)
"""


def cascade_code_sql() -> str:
    """tau*8 + reason code of the cascade (pure SQL), from per-trajectory first-hit rounds.

    Each signal's first halting round is found on its own (critic: ``crit``;
    entropy: first t with mk[k][t] < eps; no_gain: first t with
    gw[warmup][t] <= min_gain); ``least`` of (round*8 + code) then picks the
    earliest round and, on a tie, the cascade's priority (critic < entropy <
    no_gain < failsafe). Candidates past ``cap`` lose to the failsafe at cap.
    NULL (unknown signal) never halts: least() skips NULLs.
    """
    return """least(
                CASE WHEN critic THEN crit * 8 + 1 END,
                CASE WHEN entropy AND k < depth
                     THEN list_position(list_transform(mk[k], lambda v: v < eps), true) * 8 + 2 END,
                CASE WHEN gain AND warmup <= depth
                     THEN list_position(list_transform(gw[warmup], lambda v: v <= min_gain), true) * 8 + 3 END,
                cap * 8 + 4)"""


def replay_sql(executor: str = "sql") -> str:
    """Every policy x every trajectory in one query; ``executor`` picks the cascade form.

    ``sql``: the list lambda above. ``udf``: the Arrow UDF ``shp_cascade`` that
    loops :func:`shp_ray.policy.cascade.decide` (registered by analysis.db.connect).
    """
    if executor == "sql":
        code, inputs = cascade_code_sql(), "x.crit, x.mk, x.gw"
    elif executor == "udf":
        code = "shp_cascade(d_inf, s, fb, eps, k, warmup, cap, critic, entropy, gain, min_gain)"
        inputs = "x.d_inf, x.fb"
    else:
        raise ValueError(f"unknown replay executor {executor!r}; choose 'sql' or 'udf'")
    reasons = " ".join(f"WHEN {c} THEN {quote(r)}" for c, r in REASON_CODES.items())
    return f"""
WITH pt AS (
    SELECT p.policy, p.kind, p.consults_is, p.seed, p.eps, p.k, p.warmup, p.critic, p.entropy,
           p.gain, p.min_gain, least(p.max_rounds, x.depth) AS cap,
           x.gen_id, x.scenario_id, x.depth, x.s, x.cw, x.cc, x.cj, x.j, x.baseline_tokens, x.baseline_is, {inputs}
    FROM policies p CROSS JOIN trajectories x
    WHERE p.kind IN ('cascade', 'random', 'oracle')  -- the other families: analysis.families
), decided AS (
    SELECT policy, kind, consults_is, gen_id, scenario_id, depth, s, cw, cc, cj, j, cap, baseline_tokens, baseline_is,
           CASE kind
               WHEN 'cascade' THEN {code}
               WHEN 'random' THEN
                   (('0x' || left(sha256(seed::VARCHAR || ':' || scenario_id), 15))::BIGINT % cap + 1) * 8
               ELSE CASE WHEN list_max(s[1:cap]) IS NULL THEN 1
                         ELSE list_position(s[1:cap], list_max(s[1:cap])) END * 8
           END AS code
    FROM pt
), stopped AS (
    SELECT *, code // 8 AS stop_round, CASE WHEN kind = 'oracle' THEN cap ELSE code // 8 END AS paid
    FROM decided
)
SELECT policy, gen_id, scenario_id, stop_round::INTEGER AS stop_round,
       CASE kind WHEN 'cascade' THEN CASE code % 8 {reasons} END WHEN 'random' THEN 'random' ELSE 'oracle' END
           AS reason,
       (cw[paid] + CASE WHEN paid > 1 THEN cc[paid - 1] ELSE 0 END
           + CASE WHEN consults_is THEN cj[paid] ELSE 0 END)::BIGINT AS operational_tokens,
       j[stop_round]::BIGINT AS evaluation_tokens,
       s[stop_round] AS final_is,
       depth, baseline_tokens::BIGINT AS baseline_tokens, baseline_is
FROM stopped
"""


def t95_sql(df: str) -> str:
    """The one-sided 95% t quantile at ``df`` (an SQL expression); needs t95_table."""
    z = _Z95
    g = [
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    ]
    cf = f"{double(z)}" + "".join(f" + {double(gi)} / ({df})::DOUBLE ^ {i}" for i, gi in enumerate(g, start=1))
    return (
        f"CASE WHEN ({df}) < 1 THEN NULL WHEN ({df}) <= {_T_TABLE_MAX_DF} "
        f"THEN (SELECT tt.t95 FROM t95_table tt WHERE tt.df = ({df})) ELSE {cf} END"
    )


def t95_table_sql() -> str:
    rows = ", ".join(f"({df}, {double(_st.t.ppf(0.95, df))})" for df in range(1, _T_TABLE_MAX_DF + 1))
    return f"CREATE OR REPLACE TEMP TABLE t95_table AS SELECT * FROM (VALUES {rows}) v(df, t95)"


def policy_summary_sql(delta: float) -> str:
    """Per (gen_id, policy): means, token saving vs fixed_k{depth}, paired delta IS, non-inferiority.

    ``non_inferior``: the one-sided 95% lower bound of mean(final_is - baseline_is)
    is above -delta (the TOST non-inferiority test at alpha = 0.05, paired over
    trajectories with both scores known). analysis.stats gives the p-values.
    """
    shares = ", ".join(f"avg((reason = {quote(r)})::INTEGER) AS share_{r}" for r in REASON_CODES.values())
    return f"""
WITH agg AS (
    SELECT r.gen_id, r.policy, any_value(p.kind) AS kind, any_value(p.consults_is) AS consults_is,
           count(*) AS n,
           avg(r.stop_round) AS mean_rounds,
           avg(r.operational_tokens) AS mean_operational_tokens,
           avg(r.baseline_tokens) AS mean_baseline_tokens,
           (sum(r.baseline_tokens) - sum(r.operational_tokens)) / nullif(sum(r.baseline_tokens), 0)
               AS token_saving,
           avg(r.evaluation_tokens) AS mean_evaluation_tokens,
           avg(r.final_is) AS mean_is,
           avg(r.baseline_is) AS mean_baseline_is,
           count(r.final_is - r.baseline_is) AS n_is,
           avg(r.final_is - r.baseline_is) AS delta_is,
           stddev_samp(r.final_is - r.baseline_is) AS sd_delta_is,
           {shares}
    FROM replay r JOIN policies p ON p.policy = r.policy
    GROUP BY r.gen_id, r.policy
), bound AS (
    SELECT agg.*, delta_is - ({t95_sql("n_is - 1")}) * sd_delta_is / sqrt(n_is) AS delta_is_lower95
    FROM agg
)
SELECT *, {double(delta)} AS margin, delta_is_lower95 > -{double(delta)} AS non_inferior
FROM bound
ORDER BY gen_id, policy
"""
