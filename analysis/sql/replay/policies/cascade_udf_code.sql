-- An expression: the same code as cascade_code.sql through the Arrow UDF shp_cascade, which loops
-- shp_ray.policy.cascade.decide (registered by analysis.replay.cascade_udf) over the trajectory's lists.
-- Filled by sql.replay_sql: knobs (every cascade knob's column, in cascade.KNOBS' order; max_rounds as cap).
shp_cascade(d, s, a, $knobs)
