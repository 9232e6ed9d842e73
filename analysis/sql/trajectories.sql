-- One row per trajectory with per-round lists (index t = round t). Filled by sql.trajectories_sql:
-- signals (the per-round relation: round_signals).
-- d_inf: d_t with NULL/NaN (and round 1) as +inf, so "all of the last k below eps" is list_max(...) < eps
--        and a missing distance never halts.
-- s: IS_t with NaN as NULL (a NULL difference never shows "no gain").
-- a: approved(f_t); the cascade at round t reads a[t-1].
-- cw / cc / cj: cumulative writer / critic / judge tokens.
-- hl / em / f1: has_answer_line, answer EM and F1 of each round's draft (the returned draft's, by index).
WITH x AS (
    SELECT gen_id, scenario_id, round,
           CASE WHEN distance IS NULL OR isnan(distance) OR round = 1 THEN 'inf'::DOUBLE
                ELSE distance::DOUBLE END AS d_inf,
           CASE WHEN isnan(is_score) THEN NULL ELSE is_score::DOUBLE END AS s,
           approved AS a, has_answer_line AS hl, answer_em AS em, answer_f1 AS f1,
           sum(writer_tokens) OVER w AS cw,
           sum(critic_tokens) OVER w AS cc,
           sum(judge_tokens) OVER w AS cj,
           judge_tokens AS j
    FROM $signals
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
       cw[depth] + coalesce(cc[depth - 1], 0) AS baseline_tokens, s[depth] AS baseline_is,
       em[depth] AS baseline_em, f1[depth] AS baseline_f1
FROM (
    SELECT gen_id, scenario_id, count(*)::INTEGER AS depth,
           list(d_inf ORDER BY round) AS d_inf, list(s ORDER BY round) AS s,
           list(a ORDER BY round) AS a,
           list(hl ORDER BY round) AS hl, list(em ORDER BY round) AS em, list(f1 ORDER BY round) AS f1,
           list(cw::BIGINT ORDER BY round) AS cw, list(cc::BIGINT ORDER BY round) AS cc,
           list(cj::BIGINT ORDER BY round) AS cj, list(j::BIGINT ORDER BY round) AS j
    FROM x
    GROUP BY gen_id, scenario_id
)
