-- shp-query's .tables: the views and tables a query can read by name (the connection's own and its temp ones;
-- not the attached file replay_inputs is read from, analysis.replay.derived: its one table is the replay_inputs view).
SELECT DISTINCT table_name FROM information_schema.tables
WHERE table_catalog IN (current_database(), 'temp') ORDER BY 1
