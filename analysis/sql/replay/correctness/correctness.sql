-- Every replay row (and each score's oracle_<score> row, replay_scores.sql) beside the pass/fail scores of its
-- generation: whether the returned draft passes (passed; unknown: its value is unknown, counted as not passing),
-- whether the baseline fixed_k{depth}'s last draft and the first draft pass, and the trajectory's earliest passing
-- round (oracle_pass.sql). final_is: the IS of the returned draft (replay_inputs' s at returned_round).
-- judge_free: the policy never reads IS to stop (policies.consults_is false; an oracle_<score> row reads the
-- score itself, so it is not).
SELECT r.policy::VARCHAR AS policy, coalesce(p.kind, 'oracle') AS kind,
       coalesce(NOT p.consults_is, false) AND coalesce(p.kind, 'oracle') <> 'oracle' AS judge_free,
       r.gen_id, r.scenario_id, o.split, r.score, r.stop_round, r.returned_round, r.reason,
       r.operational_tokens, x.baseline_tokens, x.depth, x.s[r.returned_round] AS final_is,
       coalesce(r.final_value = 1, false) AS passed, r.final_value IS NULL AS unknown,
       o.last_passed AS baseline_passed, o.first_passed, o.oracle_round, o.oracle_passed
FROM replay_scores r
JOIN oracle_pass o ON o.gen_id = r.gen_id AND o.scenario_id = r.scenario_id AND o.score = r.score
JOIN replay_inputs x ON x.gen_id::VARCHAR = r.gen_id AND x.scenario_id = r.scenario_id
LEFT JOIN policies p ON p.policy::VARCHAR = r.policy::VARCHAR
