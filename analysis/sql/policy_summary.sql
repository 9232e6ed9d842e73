-- Per (gen_id, policy): means, token saving vs fixed_k{depth}, paired delta IS, non-inferiority.
-- Filled by sql.policy_summary_sql: shares (share_<reason> columns), t95 (the t quantile at n_is - 1), delta.
-- non_inferior: the one-sided 95% lower bound of mean(final_is - baseline_is) is above -delta (the TOST
-- non-inferiority test at alpha = 0.05, paired over trajectories with both scores known).
WITH agg AS (
    SELECT r.gen_id, r.policy, any_value(p.kind) AS kind, any_value(p.consults_is) AS consults_is,
           count(*) AS n,
           avg(r.stop_round) AS mean_rounds,
           avg(r.operational_tokens) AS mean_operational_tokens,
           avg(r.baseline_tokens) AS mean_baseline_tokens,
           (sum(r.baseline_tokens) - sum(r.operational_tokens)) / nullif(sum(r.baseline_tokens), 0)
               AS token_saving,
           avg(r.evaluation_tokens) AS mean_evaluation_tokens,
           avg(r.final_is) AS mean_is,
           avg(r.baseline_is) AS mean_baseline_is,
           count(r.final_is - r.baseline_is) AS n_is,
           avg(r.final_is - r.baseline_is) AS delta_is,
           stddev_samp(r.final_is - r.baseline_is) AS sd_delta_is,
           $shares
    FROM replay r JOIN policies p ON p.policy = r.policy
    GROUP BY r.gen_id, r.policy
), bound AS (
    SELECT agg.*, delta_is - ($t95) * sd_delta_is / sqrt(n_is) AS delta_is_lower95
    FROM agg
)
SELECT *, $delta AS margin, delta_is_lower95 > -$delta AS non_inferior
FROM bound
ORDER BY gen_id, policy
