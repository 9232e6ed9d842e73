-- shp-bench replay: one subsampled trajectory (gen_id, scenario_id).
INSERT INTO bench_keys VALUES (?, ?)
