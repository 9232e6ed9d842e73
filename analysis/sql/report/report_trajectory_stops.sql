-- The HTML report's stop markers: the round where each policy stops each trajectory, and why (the replay view), for
-- the trajectories report_trajectory_rounds.sql shows (the ? parameter: at most that many, the first by id).
SELECT r.gen_id::VARCHAR AS gen_id, r.scenario_id, r.policy, r.stop_round, r.reason
FROM replay r
JOIN (SELECT DISTINCT gen_id::VARCHAR AS gen_id, scenario_id FROM replay_inputs ORDER BY 1, 2 LIMIT ?) x
    ON x.gen_id = r.gen_id::VARCHAR AND x.scenario_id = r.scenario_id
ORDER BY r.gen_id, r.scenario_id, r.policy
