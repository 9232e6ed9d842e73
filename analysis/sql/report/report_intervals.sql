-- The figures' 95% intervals per (gen_id, policy): N, mean and SD of the operational tokens, of IS (the trajectories
-- with IS known) and of the tokens saved against fixed_k{depth} (baseline - operational, paired per trajectory).
-- analysis.report.data turns them into t intervals.
SELECT gen_id, policy, count(*) AS n,
       avg(operational_tokens) AS mean_tokens, stddev_samp(operational_tokens) AS sd_tokens,
       count(final_is) AS n_is, avg(final_is) AS mean_is, stddev_samp(final_is) AS sd_is,
       avg(baseline_tokens - operational_tokens) AS mean_saved, stddev_samp(baseline_tokens - operational_tokens)
           AS sd_saved, avg(baseline_tokens) AS mean_baseline
FROM replay GROUP BY gen_id, policy ORDER BY gen_id, policy
