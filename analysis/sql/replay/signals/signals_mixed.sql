-- round_signals' input when only some trajectories have stored signals (signal_status, from signals_coverage.sql):
-- the stored rows of those that have them (one copy of each round), the rest computed from their rounds rows.
-- Filled by sql.signals_mixed_sql: stored (signals_stored relation), computed (signals_from_rounds over the
-- rounds of trajectories without).
SELECT * FROM ($stored) s
WHERE (s.gen_id, s.scenario_id) IN (SELECT (gen_id, scenario_id) FROM signal_status WHERE stored)
QUALIFY row_number() OVER (PARTITION BY s.gen_id, s.scenario_id, s.round) = 1
UNION ALL BY NAME
SELECT * FROM ($computed)
