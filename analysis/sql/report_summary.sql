-- The report's policy tables and CSV: every row of policy_summary.
SELECT * FROM policy_summary ORDER BY gen_id, policy
