-- The HTML report's trajectory browser: every round of every replayed trajectory (its draft, the critique of it, d_t,
-- IS_t, the judge's metrics, EM / F1), with the scenario's question, gold answer and split, and the round's scores
-- (a map from each score's name to its value; NULL where the round has none). d_t is NULL at round 1 (nothing before).
-- The ? parameter: at most that many trajectories (the first by gen_id, scenario_id), so a huge store's page stays
-- a page.
SELECT r.gen_id::VARCHAR AS gen_id, r.scenario_id, r.round, r.draft, r.feedback AS critique,
       CASE WHEN r.round = 1 OR isnan(r.distance) THEN NULL ELSE r.distance END AS d_t,
       CASE WHEN isnan(r.is_score) THEN NULL ELSE r.is_score END AS is_score,
       r.faithfulness, r.answer_relevancy, r.context_precision, r.context_recall,
       r.answer_em, r.answer_f1, r.approved,
       sc.question, sc.ground_truth, sp.split, sv.scores
FROM rounds r
JOIN (SELECT DISTINCT gen_id::VARCHAR AS gen_id, scenario_id FROM replay_inputs ORDER BY 1, 2 LIMIT ?) x
    ON x.gen_id = r.gen_id AND x.scenario_id = r.scenario_id
LEFT JOIN (SELECT scenario_id, any_value(question) AS question, any_value(ground_truth) AS ground_truth
           FROM scenarios GROUP BY scenario_id) sc ON sc.scenario_id = r.scenario_id
LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id
LEFT JOIN (SELECT gen_id::VARCHAR AS gen_id, scenario_id, round, map_from_entries(list((score, value))) AS scores
           FROM scores GROUP BY ALL) sv
    ON sv.gen_id = r.gen_id::VARCHAR AND sv.scenario_id = r.scenario_id AND sv.round = r.round
ORDER BY r.gen_id, r.scenario_id, r.round
