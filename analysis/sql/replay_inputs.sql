-- One row per trajectory with every round's signals as its own column (round t of d, s, tokens ... = d_t, s_t ...):
-- the replay's inputs. Scalar columns, not lists, so each (policy, trajectory) row of the replay is a few
-- vectorised comparisons and no list is built per row. Filled by sql.replay_inputs_sql for T = the store's
-- deepest trajectory: per_round (the round-t columns, t = 1..T), derived (m<k>_<t>, g_<t>, baselines).
-- d_t: the distance with NULL/NaN (and round 1) as +inf, so "all of the last k below eps" is
--      greatest(d_(t-k+1) .. d_t) < eps = m<k>_<t> < eps, and a missing distance never halts.
-- s_t: IS_t with NaN as NULL (a NULL difference never shows "no gain"); g_t = s_t - s_(t-1).
-- a_t: approved(f_t); crit: the first round t >= 2 whose previous critique approved (policy-independent).
-- cw_t / cc_t / cj_t: cumulative writer / critic / judge tokens up to round t; j_t: judge tokens of round t.
-- hl_t / em_t / f1_t: has_answer_line, answer EM and F1 of round t's draft.
-- Columns past a trajectory's depth are NULL (or, for the sums, its totals): the replay never reads them.
WITH x AS (
    SELECT gen_id, scenario_id, round,
           CASE WHEN distance IS NULL OR isnan(distance) OR round = 1 THEN 'inf'::DOUBLE
                ELSE distance::DOUBLE END AS d,
           CASE WHEN isnan(is_score) THEN NULL ELSE is_score::DOUBLE END AS s,
           approved AS a, writer_tokens::BIGINT AS w, critic_tokens::BIGINT AS c, judge_tokens::BIGINT AS j,
           has_answer_line AS hl, answer_em AS em, answer_f1 AS f1
    FROM $signals
), g AS (
    SELECT gen_id, scenario_id, count(*)::INTEGER AS depth, min(round) FILTER (WHERE a) + 1 AS crit,
           $per_round
    FROM x
    GROUP BY gen_id, scenario_id
)
SELECT *, $derived
FROM g
