-- A sweep job's replay rows, stored as results.
SELECT * FROM replay ORDER BY policy, scenario_id
