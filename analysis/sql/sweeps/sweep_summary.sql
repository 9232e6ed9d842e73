-- A sweep job's summary table (printed by shp-sweep, returned to Hydra; costs in US dollars per trajectory), a row
-- per split and policy (a job over dev and test shows both, never pooled); n_is, margin, tost_power and n_needed
-- let shp-sweep warn when N is below what the TOST planner asks. When the tasks carry a pass/fail score, its
-- pass_at_stop and the paired delta against fixed_k{depth} ride along (correctness is what a stopping rule is
-- judged by where it exists), picked as analysis.stats.correctness.pick_score picks it: hidden_pass where there is one,
-- else the only one; several and no hidden_pass, none (the user names one in shp-query). scores: every score of the
-- store at the stop, policy_summary's map (mean, delta, delta_lower95, n_paired, non_inferior, tost_power, ...).
-- share_answer_line: with mean_f1, whether answer F1 says anything (analysis.report.data.answers_known).
WITH pass AS (
    SELECT gen_id, split, policy, score AS pass_score, pass_at_stop, delta_pass, p_mcnemar
    FROM correctness_summary
    WHERE score = 'hidden_pass' OR NOT EXISTS (SELECT 1 FROM correctness_summary WHERE score = 'hidden_pass')
          AND (SELECT count(DISTINCT score) FROM correctness_summary) = 1
)
SELECT s.split, s.policy, n, mean_rounds, mean_operational_tokens, mean_operational_cost_live_usd,
       mean_operational_cost_batch_usd, mean_operational_cost_usd, token_saving, mean_is, delta_is, non_inferior,
       mean_f1, share_answer_line, n_is, margin, tost_power, n_needed, degenerate,
       delta_is_lower95, delta_f1, delta_em, underpowered,  -- the sweep's combined table (sweeps.summary)
       pass_score, pass_at_stop, delta_pass, p_mcnemar, s.scores
FROM policy_summary s
LEFT JOIN pass c ON c.gen_id::VARCHAR = s.gen_id::VARCHAR AND c.split IS NOT DISTINCT FROM s.split AND c.policy = s.policy
ORDER BY s.split, s.policy
