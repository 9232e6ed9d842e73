-- A connection's memory bound (analysis.connect(memory_limit=...), shp-query --memory-limit): above it DuckDB
-- spills to the connection's spill folder. Filled by analysis.replay.sandbox.new_connection: limit (e.g. '1.5GB').
SET memory_limit = $limit
