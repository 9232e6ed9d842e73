-- The replay view when some policy is a family: the cascade/random/oracle rows and the family rows, same columns.
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is,
       depth, baseline_tokens, baseline_is
FROM replay_core
UNION ALL
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is,
       depth, baseline_tokens, baseline_is
FROM family_replay
