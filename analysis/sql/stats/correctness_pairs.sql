-- Every trajectory's paired outcomes under one pass/fail score (the ? parameter), with the task it is an epoch of
-- (scenarios.task_id; a scenario stored before epochs is its own task): whether each policy's returned draft passes,
-- and whether the baselines' (fixed_k{depth}, fixed_k1) do. analysis.stats.correctness clusters by task_id.
SELECT c.gen_id, c.split, c.policy, coalesce(t.task_id, c.scenario_id) AS task_id, c.scenario_id,
       c.passed, c.baseline_passed, c.first_passed
FROM correctness c
LEFT JOIN (SELECT scenario_id, any_value(task_id) AS task_id FROM scenarios GROUP BY scenario_id) t
    ON t.scenario_id = c.scenario_id
WHERE c.score = ?
ORDER BY c.gen_id, c.split, c.policy, task_id, c.scenario_id
