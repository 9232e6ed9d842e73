-- policy_summary from the buckets' shares (ray_bucket_summary.sql rows, registered as bucket_summaries): every
-- mean a ratio of summed sums and counts, the SD of the paired IS difference from the buckets' M2 and their
-- means' spread about the overall mean; then the bound, the non-inferiority verdict and the TOST plan exactly as
-- policy_summary.sql computes them (needs t95_table and tost_plan). Its columns are policy_summary's but the
-- user's scores (score_summary: not replayed bucket by bucket yet). $shares: share_<reason> from the counts;
-- $verdict: policy_verdict.sql.
WITH spread AS (
    SELECT *, sum(sum_d) OVER w / nullif(sum(n_is) OVER w, 0) AS overall_d
    FROM bucket_summaries WINDOW w AS (PARTITION BY gen_id, split, policy)
), agg AS (
    SELECT gen_id, split, policy, any_value(kind) AS kind, any_value(consults_is) AS consults_is,
           sum(n) AS n,
           sum(sum_rounds) / nullif(sum(n_rounds), 0) AS mean_rounds,
           sum(sum_operational_tokens) / nullif(sum(n_operational_tokens), 0) AS mean_operational_tokens,
           sum(sum_baseline_tokens) / nullif(sum(n_baseline_tokens), 0) AS mean_baseline_tokens,
           (sum(sum_baseline_tokens) - sum(sum_operational_tokens)) / nullif(sum(sum_baseline_tokens), 0)
               AS token_saving,
           sum(sum_evaluation_tokens) / nullif(sum(n_evaluation_tokens), 0) AS mean_evaluation_tokens,
           CASE WHEN sum(n_operational_cost_usd) = sum(n)
                THEN sum(sum_operational_cost_usd) / nullif(sum(n_operational_cost_usd), 0) END
               AS mean_operational_cost_usd,
           CASE WHEN sum(n_operational_cost_live_usd) = sum(n)
                THEN sum(sum_operational_cost_live_usd) / nullif(sum(n_operational_cost_live_usd), 0) END
               AS mean_operational_cost_live_usd,
           CASE WHEN sum(n_operational_cost_batch_usd) = sum(n)
                THEN sum(sum_operational_cost_batch_usd) / nullif(sum(n_operational_cost_batch_usd), 0) END
               AS mean_operational_cost_batch_usd,
           CASE WHEN sum(n_evaluation_cost_usd) = sum(n)
                THEN sum(sum_evaluation_cost_usd) / nullif(sum(n_evaluation_cost_usd), 0) END
               AS mean_evaluation_cost_usd,
           sum(sum_is) / nullif(sum(n_final_is), 0) AS mean_is,
           sum(sum_baseline_is) / nullif(sum(n_baseline_is), 0) AS mean_baseline_is,
           sum(n_is) AS n_is,
           sum(sum_d) / nullif(sum(n_is), 0) AS delta_is,
           CASE WHEN sum(n_is) >= 2
                THEN sqrt(sum(m2_d + n_is * (sum_d / nullif(n_is, 0) - overall_d) ** 2) / (sum(n_is) - 1)) END
               AS sd_delta_is,
           sum(sum_em) / nullif(sum(n_em), 0) AS mean_em, sum(sum_f1) / nullif(sum(n_f1), 0) AS mean_f1,
           sum(sum_delta_em) / nullif(sum(n_delta_em), 0) AS delta_em,
           sum(sum_delta_f1) / nullif(sum(n_delta_f1), 0) AS delta_f1,
           sum(sum_answer_line) / nullif(sum(n_answer_line), 0) AS share_answer_line,
           $shares
    FROM spread
    GROUP BY gen_id, split, policy
), $verdict
SELECT b.* EXCLUDE (mean_em, mean_f1, delta_em, delta_f1, share_answer_line),
       $delta AS margin, b.delta_is_lower95 > -$delta AS non_inferior,
       b.mean_em, b.mean_f1, b.delta_em, b.delta_f1, b.share_answer_line,
       p.tost_power, p.n_needed, p.degenerate, b.n_is < p.n_needed AS underpowered
FROM bound b
LEFT JOIN planned p ON p.gen_id = b.gen_id AND p.split IS NOT DISTINCT FROM b.split AND p.policy = b.policy
ORDER BY b.gen_id, b.split, b.policy
