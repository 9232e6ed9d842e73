-- One row per trajectory: the replay's inputs. The cascade's comparisons are scalar columns (m<k>_<t>, g_t), so each
-- (policy, trajectory) row of the replay is a few vectorised comparisons and no list lambda runs per row.
-- Filled by sql.replay_inputs_sql for T = the store's deepest trajectory: grouped (one row per trajectory: depth,
-- crit and r_t, t = 1..T, round t's row as one struct: replay_inputs_grouped.sql groups the per-round signals,
-- replay_inputs_stored.sql reads the store's trajectory_inputs rows), round_values (d_t, s_t, ... and the cumulative
-- sums cw_t, ... as additions over r_1..r_t), derived (m<k>_<t>, g_t, the lists); then the baselines.
-- d_t: the distance with NULL/NaN (and round 1) as +inf, so "all of the last k below eps" is
--      greatest(d_(t-k+1) .. d_t) < eps = m<k>_<t> < eps, and a missing distance never halts.
-- s_t: IS_t with NaN as NULL (a NULL difference never shows "no gain"); g_t = s_t - s_(t-1).
-- a_t: approved(f_t); crit: the first round t >= 2 whose previous critique approved (policy-independent).
-- cw_t / cc_t / cj_t: cumulative writer / critic / judge tokens up to round t; j_t: judge tokens of round t.
-- hl_t / em_t / f1_t: has_answer_line, answer EM and F1 of round t's draft.
-- lt_t: the loop's tokens paid to round t (writers <= t, critics < t: cw_t + cc_(t-1)).
-- What the cost columns need (cost_text.round_costs prices each round once; tokens stay integers, exact):
-- lp_t: prompt tokens of the loop paid to round t; jp_t: judge prompt tokens up to round t; and, only when some
-- call was paid in batch mode (batch_calls.sql), bl_t / blp_t: tokens / prompt tokens of the batch-mode loop
-- calls to round t, bj_t / bjp_t the judge's. Priced with the generation's prices (generation_prices: its
-- model's, and the judge's; NULL where the table has none, which ride along per trajectory) into lc_t / jc_t
-- (the loop's / judge's dollars paid to round t, as paid), ec_t (round t's judgment), and with batch calls
-- lcl_t / jcl_t (as if every call had been live).
-- The cascade's comparisons (m<k>_<t>, g_t) are scalar columns; every other per-round value is a list of the
-- trajectory's depth (d, s, a, cw, cc, cj, j, hl, em, f1, lt, lc, jc, ec [, lcl, jcl]; index t = round t) that
-- the replay indexes at the row's round. Columns past a trajectory's depth are NULL: the replay never reads them.
WITH g AS (
    $grouped
), r AS (
    SELECT g.gen_id, g.scenario_id, depth, crit, $round_values,
           gp.loop_input_per_mtok, gp.loop_output_per_mtok, gp.loop_batch_discount,
           gp.judge_input_per_mtok, gp.judge_output_per_mtok, gp.judge_batch_discount
    FROM g LEFT JOIN generation_prices gp ON gp.gen_id = g.gen_id
), lists AS (
    SELECT gen_id, scenario_id, depth, crit, $derived,
           loop_input_per_mtok, loop_output_per_mtok, loop_batch_discount,
           judge_input_per_mtok, judge_output_per_mtok, judge_batch_discount
    FROM r
)
-- the baseline fixed_k(depth): every round's writer, every critic but the last, no judge; gen_id as an ENUM of the
-- generations in scope (gen_type, sql.gen_id_type): every replay row carries a code, not a 64-hex string
SELECT * REPLACE (gen_id::$gen_type AS gen_id),
       lt[depth] AS baseline_tokens, s[depth] AS baseline_is, em[depth] AS baseline_em, f1[depth] AS baseline_f1
FROM lists
