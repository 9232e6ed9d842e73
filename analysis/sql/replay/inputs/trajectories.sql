-- One row per trajectory with per-round lists (index t = round t): replay_inputs' lists and baselines, under the
-- names this view always had, for the gain-model fit, the report and your own queries.
-- d_inf: d_t with NULL/NaN (and round 1) as +inf; s: IS_t with NaN as NULL; a: approved(f_t);
-- cw / cc / cj: cumulative writer / critic / judge tokens; j: judge tokens of the round;
-- hl / em / f1: has_answer_line, answer EM and F1 of each round's draft; crit: the first round t >= 2 whose
-- previous critique approved.
SELECT gen_id, scenario_id, depth, d AS d_inf, s, a, hl, em, f1, cw, cc, cj, j, crit,
       baseline_tokens, baseline_is, baseline_em, baseline_f1
FROM replay_inputs
