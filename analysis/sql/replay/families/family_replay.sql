-- The other stopping families x trajectories (analysis.replay.family_replay: family_decisions holds each one's tau,
-- reason, selected round and verdict), same columns as replay.sql plus selected_round, outcome, verified_final,
-- params_json. The trajectory's per-round values come from replay_inputs' lists (materialised; index t = round t):
-- no per-trajectory list is built here. Filled by sql.family_replay_sql: outcome_kinds (the family kinds whose
-- reasons are outcomes: verifier-first), costs (the token columns in dollars: judge-free, returned round
-- selected_round; cost_text.cost_columns_sql).
SELECT p.policy, x.gen_id, d.scenario_id, d.stop_round, d.reason,  -- p.policy, x.gen_id: replay_core's types
       -- judge-free: every writer up to tau, every critic before it, never the judge
       x.lt[d.stop_round]::BIGINT AS operational_tokens,
       x.j[d.selected_round]::BIGINT AS evaluation_tokens,
       $costs,
       x.s[d.selected_round] AS final_is,
       x.depth, x.baseline_tokens::BIGINT AS baseline_tokens, x.baseline_is, x.baseline_em, x.baseline_f1,
       d.selected_round,
       x.hl[d.selected_round] AS final_has_answer_line, x.em[d.selected_round] AS final_em,
       x.f1[d.selected_round] AS final_f1,
       CASE WHEN p.kind IN ($outcome_kinds) THEN d.reason END AS outcome,
       d.verified_final, p.params_json
FROM family_decisions d
JOIN policies p ON p.policy = d.policy
JOIN replay_inputs x ON x.gen_id = d.gen_id AND x.scenario_id = d.scenario_id
