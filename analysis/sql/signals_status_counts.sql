-- How many trajectories lack stored signals, and how many have them twice (signals_coverage.sql rows).
-- Filled by analysis.views.signals_source: status (the signals_coverage relation).
SELECT count(*) FILTER (WHERE NOT stored), count(*) FILTER (WHERE duplicated) FROM ($status)
