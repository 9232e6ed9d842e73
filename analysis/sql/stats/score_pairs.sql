-- analysis.stats.scores: each policy's score at its stop beside the baseline's, grouped by (gen_id, score, policy).
SELECT gen_id, score, policy, final_value, baseline_value
FROM replay_scores ORDER BY gen_id, score, policy, scenario_id
