-- Per (gen_id, split, policy, score) of a pass/fail score: pass_at_stop, the share of trajectories whose returned
-- draft passes, beside the policy's rounds (depth: the deepest trajectory's), operational tokens (token_saving
-- against fixed_k{depth}) and IS; the baseline's pass rate (baseline_pass: fixed_k{depth}, every round run), the first draft's (first_pass: fixed_k1)
-- and the oracle's (oracle_pass: some round passes). The paired comparison with each: the 2 x 2 table over the same
-- trajectories (both_passed, gained: this policy passes where the other fails, lost: the reverse) and the exact
-- McNemar p (two-sided binomial test of gained against gained + lost at 1/2; 1 when there are none: no discordant
-- pair, no evidence either way); analysis.stats.correctness adds the 95% interval of the difference. gap: oracle_pass -
-- pass_at_stop, the correctness this policy leaves behind; share_closed: (pass_at_stop - first_pass) /
-- (oracle_pass - first_pass), the share of the fixed_k1 -> oracle gap it closes (NULL when the oracle gains nothing).
WITH agg AS (
    SELECT gen_id, split, policy, score, any_value(kind) AS kind, bool_and(judge_free) AS judge_free,
           count(*) AS n, max(depth) AS depth, avg(stop_round) AS mean_rounds, avg(operational_tokens) AS mean_operational_tokens,
           (sum(baseline_tokens) - sum(operational_tokens)) / nullif(sum(baseline_tokens), 0) AS token_saving,
           avg(final_is) AS mean_is,
           avg(passed::INTEGER) AS pass_at_stop, count(*) FILTER (WHERE unknown) AS n_unknown,
           avg(baseline_passed::INTEGER) AS baseline_pass, avg(first_passed::INTEGER) AS first_pass,
           avg(oracle_passed::INTEGER) AS oracle_pass,
           count(*) FILTER (WHERE passed AND baseline_passed) AS both_passed,
           count(*) FILTER (WHERE passed AND NOT baseline_passed) AS gained,
           count(*) FILTER (WHERE baseline_passed AND NOT passed) AS lost,
           count(*) FILTER (WHERE passed AND first_passed) AS both_passed_k1,
           count(*) FILTER (WHERE passed AND NOT first_passed) AS gained_k1,
           count(*) FILTER (WHERE first_passed AND NOT passed) AS lost_k1
    FROM correctness
    GROUP BY gen_id, split, policy, score
)
SELECT *, pass_at_stop - baseline_pass AS delta_pass,
       $p_base AS p_mcnemar,
       pass_at_stop - first_pass AS delta_pass_k1,
       $p_k1 AS p_mcnemar_k1,
       oracle_pass - pass_at_stop AS gap,
       (pass_at_stop - first_pass) / nullif(oracle_pass - first_pass, 0) AS share_closed
FROM agg
ORDER BY gen_id, split, score, policy
