-- Trajectories whose rounds are not 1..T once each (the first five; analysis.replay.views.check_trajectories).
SELECT gen_id, scenario_id, count(*) AS n, count(DISTINCT round) AS distinct_rounds, min(round), max(round)
FROM round_parts GROUP BY gen_id, scenario_id
HAVING n <> distinct_rounds OR min(round) <> 1 OR max(round) <> n ORDER BY 1, 2 LIMIT 5
