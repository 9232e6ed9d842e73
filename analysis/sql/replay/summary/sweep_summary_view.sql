-- sweep_summary: the sweep jobs' combined table, from the results rows every shp-sweep job wrote: a row per
-- (run_id, job, policy) -- each job's replay as it was run, with its eps, k and judge -- with the tokens saved
-- and the paired delta IS against the job's own fixed_k{depth} (depth: the job's deepest cap), the one-sided 95%
-- lower bound of delta IS, N and non_inferior (that bound above -$delta: the TOST at alpha = 0.05, as in
-- policy_summary). A job that did not replay its fixed_k{depth} has no baseline: its deltas are NULL.
-- Sorted as shp-sweep prints its summary: non-inferior first, then most tokens saved.
WITH depth AS (
    SELECT run_id, max(max_rounds) AS depth FROM results GROUP BY run_id
), base AS (
    SELECT r.run_id, r.scenario_id, r.operational_tokens AS baseline_tokens, r.final_is AS baseline_is
    FROM results r JOIN depth d ON d.run_id = r.run_id AND r.policy = 'fixed_k' || d.depth::VARCHAR
), agg AS (
    SELECT r.run_id, any_value(r.job) AS job, r.policy, any_value(r.eps) AS eps, any_value(r.k) AS k,
           any_value(r.judge) AS judge, count(*) AS n, avg(r.stop_round) AS mean_rounds,
           (sum(b.baseline_tokens) - sum(r.operational_tokens)) / nullif(sum(b.baseline_tokens), 0) AS token_saving,
           count(r.final_is - b.baseline_is) AS n_is,
           avg(r.final_is - b.baseline_is) AS delta_is,
           stddev_samp(r.final_is - b.baseline_is) AS sd_delta_is
    FROM results r LEFT JOIN base b ON b.run_id = r.run_id AND b.scenario_id = r.scenario_id
    GROUP BY r.run_id, r.policy
), bound AS (
    SELECT agg.*, delta_is - ($t95) * sd_delta_is / sqrt(n_is) AS delta_is_lower95 FROM agg
)
SELECT run_id, job, policy, eps, k, judge, n, mean_rounds, token_saving, delta_is, delta_is_lower95, sd_delta_is,
       n_is, $delta AS margin, delta_is_lower95 > -$delta AS non_inferior
FROM bound
ORDER BY non_inferior DESC NULLS LAST, token_saving DESC NULLS LAST, job, policy
