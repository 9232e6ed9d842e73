-- The replay view when some policy is a family: the cascade/random/oracle rows and the family rows, same columns,
-- each with the answer metrics of its returned draft: round stop_round for the cascade/random/oracle rows,
-- selected_round for a family (which may return an earlier draft than the one it stopped at).
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, operational_cost_usd,
       operational_cost_live_usd, operational_cost_batch_usd, evaluation_cost_usd, final_is,
       depth, baseline_tokens, baseline_is, baseline_em, baseline_f1, final_has_answer_line, final_em, final_f1
FROM replay_core
UNION ALL
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, operational_cost_usd,
       operational_cost_live_usd, operational_cost_batch_usd, evaluation_cost_usd, final_is,
       depth, baseline_tokens, baseline_is, baseline_em, baseline_f1, final_has_answer_line, final_em, final_f1
FROM family_replay
