-- An expression: the same code as cascade_code.sql through the Arrow UDF shp_cascade, which loops
-- shp_ray.policy.cascade.decide (registered by analysis.replay.cascade_udf) over the trajectory's lists.
shp_cascade(d, s, a, eps, k, warmup, cap, critic, entropy, gain, min_gain)
