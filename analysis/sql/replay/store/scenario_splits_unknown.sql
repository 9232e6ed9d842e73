-- scenario_splits where there is no scenarios table (the replay over in-memory signals): no split is known, and
-- policy_summary's split is NULL.
SELECT NULL::VARCHAR AS scenario_id, NULL::VARCHAR AS split LIMIT 0
