-- shp-query --signals check, one rounds part at a time: the signals recomputed from its rounds
-- (recomputed_signals) against the stored ones (stored_signals, current version; identical copies count once).
-- Returns: rows compared, trajectories without stored signals, rows that differ, the first few of those.
-- Filled by sql.signals_check_sql: differs (any value column IS DISTINCT FROM its stored value), limit.
WITH s AS (SELECT DISTINCT * FROM stored_signals),
j AS (
    SELECT r.gen_id, r.scenario_id, r.round, s.gen_id IS NULL AS unstored, $differs AS differs
    FROM recomputed_signals r
    LEFT JOIN s ON s.gen_id = r.gen_id AND s.scenario_id = r.scenario_id AND s.round = r.round
)
SELECT count(*) FILTER (WHERE NOT unstored),
       count(DISTINCT (gen_id, scenario_id)) FILTER (WHERE unstored),
       count(*) FILTER (WHERE NOT unstored AND differs),
       (list(gen_id || ' / ' || scenario_id || ' round ' || round) FILTER (WHERE NOT unstored AND differs))[1:$limit]
FROM j
