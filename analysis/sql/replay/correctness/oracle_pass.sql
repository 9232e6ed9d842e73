-- Per trajectory and pass/fail score (pass_rounds.sql): the earliest round whose draft passes (oracle_round, NULL
-- when none does), and whether round 1 and the last round (the baseline fixed_k{depth}'s) pass. An oracle that
-- stops at oracle_round passes exactly when any round passes; like oracle_is it has to run every round to know.
SELECT gen_id, scenario_id, split, score, depth,
       min(round) FILTER (WHERE passed) AS oracle_round,
       bool_or(passed) AS oracle_passed,
       bool_or(passed AND round = 1) AS first_passed,
       bool_or(passed AND round = depth) AS last_passed,
       count(*) FILTER (WHERE passed) AS rounds_passed
FROM pass_rounds
GROUP BY gen_id, scenario_id, split, score, depth
