-- analysis.stats: each replay row beside its baseline fixed_k{depth}, grouped by (gen_id, split, policy) in order:
-- the paired tests run per split, as policy_summary does (scenario_splits.sql), never over dev and test pooled.
SELECT r.gen_id, sp.split, r.policy, r.stop_round, r.depth, r.operational_tokens, r.baseline_tokens, r.final_is,
       r.baseline_is
FROM replay r LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id
ORDER BY r.gen_id, sp.split, r.policy, r.scenario_id
