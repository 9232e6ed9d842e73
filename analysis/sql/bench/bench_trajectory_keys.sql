-- shp-bench replay: every trajectory, to subsample from.
SELECT gen_id, scenario_id FROM trajectories ORDER BY scenario_id
