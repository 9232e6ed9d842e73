-- Each replay row with the round of the draft it returns ($returned: stop_round, or a stopping family's
-- selected_round through $families' join) and its split (analysis.stats.answer_outcomes).
SELECT r.policy, r.gen_id::VARCHAR AS gen_id, sp.split, r.scenario_id, r.depth, r.final_f1, r.baseline_f1,
       $returned AS returned_round
FROM replay r LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id $families
