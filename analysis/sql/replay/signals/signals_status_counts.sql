-- How many trajectories lack stored signals, have them twice, or have signals but no rounds (signals_coverage.sql).
-- Filled by analysis.replay.views.signals_source: status (the signals_coverage relation).
SELECT count(*) FILTER (WHERE NOT stored AND NOT orphaned), count(*) FILTER (WHERE duplicated),
       count(*) FILTER (WHERE orphaned)
FROM ($status)
