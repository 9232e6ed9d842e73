-- shp-bench replay: the per-round signals of the subsample, in trajectory order. columns: SIGNAL_COLUMNS' names.
SELECT $columns FROM rounds JOIN bench_keys USING (gen_id, scenario_id) ORDER BY gen_id, scenario_id, round
