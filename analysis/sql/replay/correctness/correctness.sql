-- Every replay row (and each score's oracle_<score> row, replay_scores.sql) beside the pass/fail scores of its
-- generation: whether the returned draft passes (passed; unknown: its value is unknown, counted as not passing),
-- whether the baseline fixed_k{depth}'s last draft and the first draft pass, and the trajectory's earliest passing
-- round (oracle_pass.sql). final_is: the IS of the returned draft (replay_inputs' s at returned_round).
-- judge_free: the policy never reads IS to stop (policies.consults_is false; an oracle_<score> row reads the
-- score itself, so it is not; the resampling control, kind '$kind' and reason '$reason', reads the visible tests).
-- Filled by analysis.replay.views (shp_ray.policy.resample's names). final_is: NULL for a draft of another
-- generation (the control's): this trajectory's IS does not score it.
SELECT r.policy::VARCHAR AS policy, coalesce(p.kind, CASE WHEN r.reason = '$reason' THEN '$kind' ELSE 'oracle' END) AS kind,
       coalesce(NOT p.consults_is, r.reason = '$reason') AS judge_free,
       r.gen_id, r.scenario_id, o.split, r.score, r.stop_round, r.returned_round, r.reason,
       r.operational_tokens, x.baseline_tokens, x.depth,
       CASE WHEN r.drawn_from = r.gen_id THEN x.s[r.returned_round] END AS final_is,
       coalesce(r.final_value = 1, false) AS passed, r.final_value IS NULL AS unknown,
       o.last_passed AS baseline_passed, o.first_passed, o.oracle_round, o.oracle_passed
FROM replay_scores r
JOIN oracle_pass o ON o.gen_id = r.gen_id AND o.scenario_id = r.scenario_id AND o.score = r.score
JOIN replay_inputs x ON x.gen_id::VARCHAR = r.gen_id AND x.scenario_id = r.scenario_id
LEFT JOIN policies p ON p.policy::VARCHAR = r.policy::VARCHAR
