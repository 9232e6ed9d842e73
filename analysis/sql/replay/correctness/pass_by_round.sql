-- Per (gen_id, split, score, round) of a pass/fail score (pass_rounds.sql): how many trajectories reach the round, how
-- many of their drafts pass (pass_rate: round 1's is fixed_k1's pass rate), and what the revision into this round did:
-- broke (round t-1 passed, round t fails) out of from_passing, fixed (round t-1 failed, round t passes) out of
-- from_failing (NULL at round 1: nothing was revised yet).
WITH paired AS (
    SELECT *, lag(passed) OVER (PARTITION BY gen_id, scenario_id, score ORDER BY round) AS prev_passed
    FROM pass_rounds
)
SELECT gen_id, split, score, round, count(*) AS n, count(*) FILTER (WHERE passed) AS passed,
       avg(passed::INTEGER) AS pass_rate, count(*) FILTER (WHERE unknown) AS n_unknown,
       CASE WHEN round > 1 THEN count(*) FILTER (WHERE prev_passed) END AS from_passing,
       CASE WHEN round > 1 THEN count(*) FILTER (WHERE prev_passed AND NOT passed) END AS broke,
       CASE WHEN round > 1 THEN count(*) FILTER (WHERE NOT prev_passed) END AS from_failing,
       CASE WHEN round > 1 THEN count(*) FILTER (WHERE NOT prev_passed AND passed) END AS fixed
FROM paired
GROUP BY gen_id, split, score, round
ORDER BY gen_id, split, score, round
