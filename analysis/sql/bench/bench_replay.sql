-- shp-bench replay: the timed query, every policy x every trajectory, with the cost columns a sweep job reads.
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, operational_cost_usd,
       operational_cost_live_usd, operational_cost_batch_usd, evaluation_cost_usd, final_is FROM replay
