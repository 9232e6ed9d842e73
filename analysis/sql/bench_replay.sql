-- shp-bench replay: the timed query, every policy x every trajectory.
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is FROM replay
