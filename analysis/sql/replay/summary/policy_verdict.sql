-- Common table expressions (they follow an `agg` CTE of n_is, delta_is and sd_delta_is per gen_id, split and
-- policy): `bound` adds delta_is_lower95, the one-sided 95% lower bound of the paired IS difference ($t95: the t
-- quantile at n_is - 1), and `planned` the TOST's power at that N, the N it needs for 0.8 at the margin $delta,
-- and whether the differences have no spread at all (needs tost_plan). One text for policy_summary.sql and
-- ray_policy_summary.sql, so a replay on Ray reaches the verdict the single-node replay reaches.
bound AS (
    SELECT agg.*, delta_is - ($t95) * sd_delta_is / sqrt(n_is) AS delta_is_lower95
    FROM agg
), planned AS (
    SELECT gen_id, split, policy, tost_power(n_is, $delta / sd_delta_is) AS tost_power,
           tost_n_needed($delta / sd_delta_is) AS n_needed, n_is >= 2 AND sd_delta_is = 0 AS degenerate
    FROM bound
)
