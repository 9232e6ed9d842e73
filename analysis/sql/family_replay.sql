-- The other stopping families x trajectories (analysis.family_replay: family_decisions holds each one's tau,
-- reason, selected round and verdict), same columns as replay.sql plus selected_round, outcome, verified_final,
-- params_json. Filled by sql.family_replay_sql: outcome_kinds (the family kinds whose reasons are outcomes:
-- verifier-first).
WITH parsed AS (
    SELECT d.policy, p.kind, p.params_json, d.gen_id, d.scenario_id, d.stop_round, d.reason, d.selected_round,
           d.verified_final, x.depth, x.s, x.cw, x.cc, x.j, x.hl, x.em, x.f1, x.baseline_tokens, x.baseline_is
    FROM family_decisions d
    JOIN policies p ON p.policy = d.policy
    JOIN trajectories x ON x.gen_id = d.gen_id AND x.scenario_id = d.scenario_id
)
SELECT policy, gen_id, scenario_id, stop_round, reason,
       -- judge-free: every writer up to tau, every critic before it, never the judge
       (cw[stop_round] + CASE WHEN stop_round > 1 THEN cc[stop_round - 1] ELSE 0 END)::BIGINT AS operational_tokens,
       j[selected_round]::BIGINT AS evaluation_tokens,
       s[selected_round] AS final_is,
       depth, baseline_tokens::BIGINT AS baseline_tokens, baseline_is,
       selected_round,
       hl[selected_round] AS final_has_answer_line, em[selected_round] AS final_em, f1[selected_round] AS final_f1,
       CASE WHEN kind IN ($outcome_kinds) THEN reason END AS outcome,
       verified_final, params_json
FROM parsed
