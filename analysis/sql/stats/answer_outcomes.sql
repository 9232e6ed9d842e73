-- Each policy's returned draft scored under both readings (strict: replay's final_f1; lenient: answers_lenient),
-- beside the baseline's last draft, per split ($returned: answer_returned.sql).
WITH r AS ($returned)
SELECT r.policy, r.split, r.scenario_id, r.final_f1 AS strict_f1, r.baseline_f1 AS strict_baseline_f1,
       a.answer_f1 AS lenient_f1, b.answer_f1 AS lenient_baseline_f1
FROM r
LEFT JOIN answers_lenient a ON a.gen_id = r.gen_id AND a.scenario_id = r.scenario_id AND a.round = r.returned_round
LEFT JOIN answers_lenient b ON b.gen_id = r.gen_id AND b.scenario_id = r.scenario_id AND b.round = r.depth
ORDER BY r.policy, r.split, r.scenario_id
