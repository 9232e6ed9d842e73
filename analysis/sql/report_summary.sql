-- The report's policy tables and CSV: every row of policy_summary (a row per generation, split and policy).
SELECT * FROM policy_summary ORDER BY gen_id, split, policy
