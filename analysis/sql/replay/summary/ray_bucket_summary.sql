-- One bucket's share of policy_summary (analysis.replay.ray_replay): per (gen_id, split, policy) the sums and counts that
-- every mean of policy_summary is the ratio of, and for the paired IS difference d = final_is - baseline_is its
-- count, sum and M2 (the sum of squared deviations from the bucket's own mean), which add up exactly across
-- buckets (Chan, Golub & LeVeque's pairwise update). $shares: stopped_<reason> per stop reason (counts).
SELECT r.gen_id::VARCHAR AS gen_id, sp.split, r.policy, any_value(p.kind) AS kind,
       any_value(p.consults_is) AS consults_is, count(*) AS n,
       sum(r.stop_round) AS sum_rounds, count(r.stop_round) AS n_rounds,
       sum(r.operational_tokens) AS sum_operational_tokens, count(r.operational_tokens) AS n_operational_tokens,
       sum(r.baseline_tokens) AS sum_baseline_tokens, count(r.baseline_tokens) AS n_baseline_tokens,
       sum(r.evaluation_tokens) AS sum_evaluation_tokens, count(r.evaluation_tokens) AS n_evaluation_tokens,
       sum(r.operational_cost_usd) AS sum_operational_cost_usd, count(r.operational_cost_usd) AS n_operational_cost_usd,
       sum(r.operational_cost_live_usd) AS sum_operational_cost_live_usd,
       count(r.operational_cost_live_usd) AS n_operational_cost_live_usd,
       sum(r.operational_cost_batch_usd) AS sum_operational_cost_batch_usd,
       count(r.operational_cost_batch_usd) AS n_operational_cost_batch_usd,
       sum(r.evaluation_cost_usd) AS sum_evaluation_cost_usd, count(r.evaluation_cost_usd) AS n_evaluation_cost_usd,
       sum(r.final_is) AS sum_is, count(r.final_is) AS n_final_is,
       sum(r.baseline_is) AS sum_baseline_is, count(r.baseline_is) AS n_baseline_is,
       count(r.final_is - r.baseline_is) AS n_is, sum(r.final_is - r.baseline_is) AS sum_d,
       var_pop(r.final_is - r.baseline_is) * count(r.final_is - r.baseline_is) AS m2_d,
       sum(r.final_em) AS sum_em, count(r.final_em) AS n_em, sum(r.final_f1) AS sum_f1, count(r.final_f1) AS n_f1,
       sum(r.final_em - r.baseline_em) AS sum_delta_em, count(r.final_em - r.baseline_em) AS n_delta_em,
       sum(r.final_f1 - r.baseline_f1) AS sum_delta_f1, count(r.final_f1 - r.baseline_f1) AS n_delta_f1,
       sum(r.final_has_answer_line::INTEGER) AS sum_answer_line, count(r.final_has_answer_line) AS n_answer_line,
       count(r.reason) AS n_reason, $shares
FROM replay r JOIN policies p ON p.policy = r.policy
LEFT JOIN scenario_splits sp ON sp.scenario_id = r.scenario_id
GROUP BY r.gen_id, sp.split, r.policy
