-- The TOST planner in SQL (analysis.stats.tost_power / tost_n_needed compute the same with scipy), so policy_summary
-- in the plain DuckDB CLI says the power too. Filled by sql.tost_plan_sql: rows ("(n, es80), ...": the standardised
-- margin delta / SD that the paired TOST at alpha 0.05 detects with power 0.8 at n pairs, from scipy's noncentral t),
-- points (quadrature points), t95_list / max_df / cornish_fisher (t95_table's quantiles, see t95.sql), z_sum / z_alpha (normal quantiles, see below).
--
-- tost_power(n, es): the chance that the paired non-inferiority test at alpha 0.05 on n pairs says "non-inferior"
-- when the policy is in truth exactly as good as the baseline, es = delta / SD of the differences: P(T > t95(n - 1))
-- for T noncentral t (df = n - 1, nc = es sqrt(n)). With s = sqrt(chi2_df / df), P(T > t) = E[Phi(nc - t s)]: a
-- midpoint sum over ln s (the integrand dies off smoothly at both ends, so the sum converges fast: |error| < 1e-7
-- against scipy), Phi by Abramowitz & Stegun 26.2.17 (|error| < 7.5e-8). Macros, because DuckDB has no normal CDF
-- and a lambda cannot hold a subquery.
-- tost_n_needed(es): the fewest pairs with power >= 0.8, exact from the table; beyond it Guenther's
-- n = ((z_0.95 + z_0.8) / es)^2 + z_0.95^2 / 2 (at most one pair short of the exact count there).
CREATE OR REPLACE TEMP TABLE tost_n_table AS SELECT * FROM (VALUES $rows) v(n, es80);
CREATE OR REPLACE TEMP MACRO std_normal_tail(x, k) AS
    exp(-x * x / 2) * 0.3989422804014327 * k
    * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))));
CREATE OR REPLACE TEMP MACRO std_normal_cdf(x) AS
    CASE WHEN x >= 0 THEN 1 - std_normal_tail(x, 1 / (1 + 0.2316419 * x))
         ELSE std_normal_tail(-x, 1 / (1 - 0.2316419 * x)) END;
CREATE OR REPLACE TEMP MACRO tost_power_sum(df, nc, tc, lo, hi) AS
    (hi - lo) / $points * list_sum(list_transform(
        list_transform(range($points), lambda i: exp(lo + (i + 0.5) * (hi - lo) / $points)),
        -- Phi(nc - t s) times the density of s (2 (df/2)^(df/2) / Gamma(df/2) s^(df-1) e^(-df s^2/2)), times s (ds = s d ln s)
        lambda s: std_normal_cdf(nc - tc * s)
                  * exp(ln(2) + df / 2 * ln(df / 2) - lgamma(df / 2) + df * ln(s) - df * s * s / 2)));
-- t95_of(df): t95_table's quantiles as a list literal, so tost_power needs no subquery: a subquery correlated
-- through a macro with the caller's columns (policy_summary's n_is) does not bind in the DuckDB CLI 1.5.6 that
-- `duckdb -init views.sql` runs ("Referenced table ... not found"), and a lambda cannot hold one.
CREATE OR REPLACE TEMP MACRO t95_of(df) AS
    CASE WHEN df < 1 THEN NULL WHEN df <= $max_df THEN ($t95_list::DOUBLE[])[df::BIGINT] ELSE $cornish_fisher END;
CREATE OR REPLACE TEMP MACRO tost_power(n, es) AS
    CASE WHEN n >= 2 AND es > 0 AND isfinite(es) THEN
        tost_power_sum(n - 1, es * sqrt(n), t95_of(n - 1),
                       ln(greatest(1e-9, 1 - 12 / sqrt(2 * (n - 1)))), ln(1 + 12 / sqrt(2 * (n - 1)))) END;
CREATE OR REPLACE TEMP MACRO tost_n_needed(es) AS
    CASE WHEN es IS NULL OR NOT (es > 0 AND isfinite(es)) THEN NULL
         WHEN es >= (SELECT min(es80) FROM tost_n_table) THEN (SELECT min(n) FROM tost_n_table WHERE es80 <= es)
         ELSE ceil(($z_sum / es) ^ 2 + $z_alpha ^ 2 / 2)::BIGINT END
