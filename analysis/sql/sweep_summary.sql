-- A sweep job's summary table (printed by shp-sweep, returned to Hydra).
SELECT policy, n, mean_rounds, mean_operational_tokens, token_saving, mean_is, delta_is, non_inferior
FROM policy_summary ORDER BY policy
