-- Per (gen_id, split, policy, score): the score at the policy's stop beside the baseline fixed_k{depth}, with the paired
-- statistics policy_summary gives IS (analysis.stats.scores adds the t-test, Wilcoxon, bootstrap CI and Holm).
-- Filled by sql.score_summary_sql: t95 (the t quantile at n_paired - 1), delta (the non-inferiority margin).
-- mean_value / mean_baseline_value: over the trajectories with a value; delta: mean(final - baseline) over those
-- with both (n_paired); non_inferior: its one-sided 95% lower bound is above -delta; tost_power / n_needed /
-- degenerate as in policy_summary. share_failed: the share of the split's scored rounds where this score's
-- scorer raised (share_failed_at_stop: of the returned drafts). split: as in policy_summary (scenario_splits.sql),
-- so each row pairs with policy_summary's row of the same (gen_id, split, policy), whose scores map it fills.
WITH agg AS (
    SELECT r.gen_id, sp.split, r.policy, r.score, count(*) AS n,
           avg(stop_round) AS mean_rounds, avg(operational_tokens) AS mean_operational_tokens,
           avg(final_value) AS mean_value, avg(baseline_value) AS mean_baseline_value,
           count(final_value - baseline_value) AS n_paired,
           avg(final_value - baseline_value) AS delta,
           stddev_samp(final_value - baseline_value) AS sd_delta,
           avg((final_error IS NOT NULL)::INTEGER) AS share_failed_at_stop
    FROM replay_scores r LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id
    GROUP BY r.gen_id, sp.split, r.policy, r.score
), bound AS (
    SELECT agg.*, delta - ($t95) * sd_delta / sqrt(n_paired) AS delta_lower95 FROM agg
), planned AS (
    SELECT gen_id, split, policy, score, tost_power(n_paired, $delta / sd_delta) AS tost_power,
           tost_n_needed($delta / sd_delta) AS n_needed, n_paired >= 2 AND sd_delta = 0 AS degenerate
    FROM bound
), failed AS (
    SELECT s.gen_id, sp.split, s.score, avg((s.error IS NOT NULL)::INTEGER) AS share_failed
    FROM scores s LEFT JOIN scenario_splits sp ON sp.scenario_id = s.scenario_id
    GROUP BY s.gen_id, sp.split, s.score
)
SELECT b.*, $delta AS margin, b.delta_lower95 > -$delta AS non_inferior,
       p.tost_power, p.n_needed, p.degenerate, b.n_paired < p.n_needed AS underpowered, f.share_failed
FROM bound b
LEFT JOIN planned p ON p.gen_id = b.gen_id AND p.split IS NOT DISTINCT FROM b.split AND p.policy = b.policy
                       AND p.score = b.score
LEFT JOIN failed f ON f.gen_id = b.gen_id AND f.split IS NOT DISTINCT FROM b.split AND f.score = b.score
ORDER BY b.gen_id, b.split, b.score, b.policy
