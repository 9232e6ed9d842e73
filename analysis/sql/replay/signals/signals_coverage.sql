-- Which trajectories have their stored signals (signals_stored.sql rows): one row per trajectory of round_parts,
-- stored = as many current signals rows as rounds (or more: identical copies, when two writers raced); and one
-- row per trajectory that has signals but no rounds (orphaned: its rounds part was quarantined), never replayed.
-- Filled by sql.signals_coverage_sql: stored (the signals_stored relation).
WITH r AS (SELECT gen_id, scenario_id, count(*) AS n FROM round_parts GROUP BY gen_id, scenario_id),
s AS (SELECT gen_id, scenario_id, count(*) AS n FROM ($stored) GROUP BY gen_id, scenario_id)
SELECT coalesce(r.gen_id, s.gen_id) AS gen_id, coalesce(r.scenario_id, s.scenario_id) AS scenario_id,
       r.n IS NOT NULL AND coalesce(s.n >= r.n, false) AS stored, coalesce(s.n > r.n, false) AS duplicated,
       r.n IS NULL AS orphaned
FROM r FULL JOIN s ON s.gen_id = r.gen_id AND s.scenario_id = r.scenario_id
