-- analysis.stats (Conjecture 1): each trajectory's distances d_2..d_T in round order; the trajectories in key order,
-- so the seeded bootstrap over them resamples the same values in every run.
SELECT gen_id, scenario_id, list(distance ORDER BY round) AS d FROM rounds WHERE round > 1 GROUP BY gen_id, scenario_id
ORDER BY gen_id, scenario_id
