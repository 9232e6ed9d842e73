-- analysis.stats: each replay row beside its baseline fixed_k{depth}, grouped by (gen_id, policy) in order.
SELECT gen_id, policy, stop_round, depth, operational_tokens, baseline_tokens, final_is, baseline_is
FROM replay ORDER BY gen_id, policy, scenario_id
