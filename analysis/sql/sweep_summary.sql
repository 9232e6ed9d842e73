-- A sweep job's summary table (printed by shp-sweep, returned to Hydra; costs in US dollars per trajectory), a row
-- per split and policy (a job over dev and test shows both, never pooled); n_is, margin, tost_power and n_needed
-- let shp-sweep warn when N is below what the TOST planner asks.
SELECT split, policy, n, mean_rounds, mean_operational_tokens, mean_operational_cost_live_usd,
       mean_operational_cost_batch_usd, mean_operational_cost_usd, token_saving, mean_is, delta_is, non_inferior,
       mean_f1, n_is, margin, tost_power, n_needed, degenerate
FROM policy_summary ORDER BY split, policy
