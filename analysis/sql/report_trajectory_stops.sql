-- The HTML report's stop markers: the round where each policy stops each trajectory, and why (the replay view).
SELECT gen_id::VARCHAR AS gen_id, scenario_id, policy, stop_round, reason FROM replay ORDER BY gen_id, scenario_id, policy
