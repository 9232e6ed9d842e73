-- The report's policy tables and CSV: every row of policy_summary (a row per generation, split and policy), but its
-- scores map, which no CSV cell or table column holds (score_summary has one row per score).
SELECT * EXCLUDE (scores) FROM policy_summary ORDER BY gen_id, split, policy
