-- Each scenario's split (dev | test | ...): the key policy_summary, the paired statistics and the report group by
-- beside gen_id, so a store holding several splits is summarised per split, never pooled silently. A scenario id
-- stored under two splits (two datasets sharing an id) shows as both ('dev+test'), never as one of them.
SELECT scenario_id, string_agg(DISTINCT split, '+' ORDER BY split) AS split FROM scenarios GROUP BY scenario_id
