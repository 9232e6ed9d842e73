-- shp-bench replay: the subsample of trajectories the Python loop runs on.
CREATE OR REPLACE TEMP TABLE bench_keys(gen_id VARCHAR, scenario_id VARCHAR)
