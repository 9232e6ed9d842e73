-- Per (gen_id, split, policy): means, token saving vs fixed_k{depth}, paired delta IS, non-inferiority, then answer
-- correctness and the power of the non-inferiority test. Filled by sql.policy_summary_sql: shares (share_<reason>
-- columns), verdict (policy_verdict.sql: the bound and the TOST plan), delta.
-- non_inferior: the one-sided 95% lower bound of mean(final_is - baseline_is) is above -delta (the TOST
-- non-inferiority test at alpha = 0.05, paired over trajectories with both scores known).
-- mean_em / mean_f1: HotpotQA's answer metrics of the returned drafts; delta_em / delta_f1 paired against the
-- baseline's last draft; share_answer_line: the returned drafts that state an "Answer:" line (the others score 0).
-- tost_power / n_needed (tost_plan.sql): the power at N = n_is and the SD of the IS differences, and the N for
-- power 0.8, so "non-inferior" never stands without its N and power. degenerate: every difference is the same
-- (zero variance, e.g. the returned drafts are the baseline's): there is no test, whatever non_inferior says.
-- mean_*_cost_usd: the replay's cost columns per trajectory, in US dollars (as paid; if every call were live; if
-- every call were batch; the evaluation), NULL when any trajectory's is NULL (an unpriced model): avg() alone
-- would skip them and report the priced rest as the whole.
-- split: the scenarios' split (scenario_splits.sql): a store holding dev and test gives a row per split.
-- scores: the user's scores (score_summary.sql's row of the same gen_id, split and policy) as a map from the score's
-- name to {mean, baseline, delta, delta_lower95, n_paired, non_inferior, share_failed}, e.g.
-- scores['pass'].delta; NULL where the generation has no scores. No oracle_is row where no draft has an IS (a store
-- without a judge): the oracle would stop at round 1 on unknown IS, fixed_k1 under another name.
WITH agg AS (
    SELECT r.gen_id, sp.split, r.policy, any_value(p.kind) AS kind, any_value(p.consults_is) AS consults_is,
           count(*) AS n,
           avg(r.stop_round) AS mean_rounds,
           avg(r.operational_tokens) AS mean_operational_tokens,
           avg(r.baseline_tokens) AS mean_baseline_tokens,
           (sum(r.baseline_tokens) - sum(r.operational_tokens)) / nullif(sum(r.baseline_tokens), 0)
               AS token_saving,
           avg(r.evaluation_tokens) AS mean_evaluation_tokens,
           CASE WHEN count(r.operational_cost_usd) = count(*) THEN avg(r.operational_cost_usd) END
               AS mean_operational_cost_usd,
           CASE WHEN count(r.operational_cost_live_usd) = count(*) THEN avg(r.operational_cost_live_usd) END
               AS mean_operational_cost_live_usd,
           CASE WHEN count(r.operational_cost_batch_usd) = count(*) THEN avg(r.operational_cost_batch_usd) END
               AS mean_operational_cost_batch_usd,
           CASE WHEN count(r.evaluation_cost_usd) = count(*) THEN avg(r.evaluation_cost_usd) END
               AS mean_evaluation_cost_usd,
           avg(r.final_is) AS mean_is,
           avg(r.baseline_is) AS mean_baseline_is,
           count(r.final_is - r.baseline_is) AS n_is,
           avg(r.final_is - r.baseline_is) AS delta_is,
           stddev_samp(r.final_is - r.baseline_is) AS sd_delta_is,
           avg(r.final_em) AS mean_em, avg(r.final_f1) AS mean_f1,
           avg(r.final_em - r.baseline_em) AS delta_em, avg(r.final_f1 - r.baseline_f1) AS delta_f1,
           avg(r.final_has_answer_line::INTEGER) AS share_answer_line,
           $shares
    FROM replay r JOIN policies p ON p.policy = r.policy
    LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id
    GROUP BY r.gen_id, sp.split, r.policy
), $verdict, scored AS (
    SELECT gen_id, split, policy,
           map_from_entries(list((score, {'mean': mean_value, 'baseline': mean_baseline_value, 'delta': delta,
                                          'delta_lower95': delta_lower95, 'n_paired': n_paired,
                                          'non_inferior': non_inferior, 'share_failed': share_failed,
                                          'tost_power': tost_power, 'n_needed': n_needed,
                                          'degenerate': degenerate, 'underpowered': underpowered})
                                 ORDER BY score)) AS scores
    FROM score_summary GROUP BY gen_id, split, policy
)
SELECT b.* EXCLUDE (mean_em, mean_f1, delta_em, delta_f1, share_answer_line),
       $delta AS margin, b.delta_is_lower95 > -$delta AS non_inferior,
       b.mean_em, b.mean_f1, b.delta_em, b.delta_f1, b.share_answer_line,
       p.tost_power, p.n_needed, p.degenerate, b.n_is < p.n_needed AS underpowered, s.scores
FROM bound b
LEFT JOIN planned p ON p.gen_id = b.gen_id AND p.split IS NOT DISTINCT FROM b.split AND p.policy = b.policy
LEFT JOIN scored s ON s.gen_id = b.gen_id::VARCHAR AND s.split IS NOT DISTINCT FROM b.split AND s.policy = b.policy
WHERE NOT (b.kind = 'oracle' AND b.n_is = 0)
ORDER BY b.gen_id, b.split, b.policy
