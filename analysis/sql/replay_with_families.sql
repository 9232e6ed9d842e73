-- The replay view when some policy is a family: the cascade/random/oracle rows and the family rows, same columns,
-- with the answer metrics of the returned draft (answers.sql): round stop_round for the cascade/random/oracle rows,
-- selected_round for a family (which may return an earlier draft than the one it stopped at).
WITH returned AS (
    SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is,
           depth, baseline_tokens, baseline_is, stop_round AS returned_round
    FROM replay_core
    UNION ALL
    SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is,
           depth, baseline_tokens, baseline_is, selected_round AS returned_round
    FROM family_replay
)
SELECT x.* EXCLUDE (returned_round),
       a.has_answer_line AS final_has_answer_line, a.answer_em AS final_em, a.answer_f1 AS final_f1
FROM returned x
LEFT JOIN answers a ON a.gen_id = x.gen_id AND a.scenario_id = x.scenario_id AND a.round = x.returned_round
