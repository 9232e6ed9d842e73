-- An expression: the same code as cascade_code.sql through the Arrow UDF shp_cascade, which loops
-- shp_ray.policy.cascade.decide (registered by analysis.cascade_udf) over the trajectory's lists.
-- Filled by sql.replay_sql: d_list, s_list, a_list (the round columns of replay_inputs as lists of depth).
shp_cascade($d_list, $s_list, $a_list, eps, k, warmup, cap, critic, entropy, gain, min_gain)
