-- shp-bench replay: the replay rows of the subsample (bench_keys), to compare with the Python loop.
SELECT policy, gen_id, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens, final_is
FROM replay JOIN bench_keys USING (gen_id, scenario_id)
