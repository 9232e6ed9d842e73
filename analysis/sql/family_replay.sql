-- The other stopping families x trajectories (analysis.family_replay: family_decisions holds each one's tau,
-- reason, selected round and verdict), same columns as replay.sql plus selected_round, outcome, verified_final,
-- params_json. The trajectory's columns come from replay_inputs (materialised, one scalar column per round):
-- no per-trajectory list is built. Filled by sql.family_replay_sql: outcome_kinds (the family kinds whose reasons
-- are outcomes: verifier-first) and the round picks (CASE <round> WHEN t THEN <column>_t ...): cw_stop,
-- cc_before_stop, j_sel, s_sel, hl_sel, em_sel, f1_sel.
SELECT d.policy, d.gen_id, d.scenario_id, d.stop_round, d.reason,
       -- judge-free: every writer up to tau, every critic before it, never the judge
       ($cw_stop + CASE WHEN d.stop_round > 1 THEN $cc_before_stop ELSE 0 END)::BIGINT AS operational_tokens,
       ($j_sel)::BIGINT AS evaluation_tokens,
       $s_sel AS final_is,
       x.depth, x.baseline_tokens::BIGINT AS baseline_tokens, x.baseline_is,
       d.selected_round,
       $hl_sel AS final_has_answer_line, $em_sel AS final_em, $f1_sel AS final_f1,
       CASE WHEN p.kind IN ($outcome_kinds) THEN d.reason END AS outcome,
       d.verified_final, p.params_json
FROM family_decisions d
JOIN policies p ON p.policy = d.policy
JOIN replay_inputs x ON x.gen_id = d.gen_id AND x.scenario_id = d.scenario_id
