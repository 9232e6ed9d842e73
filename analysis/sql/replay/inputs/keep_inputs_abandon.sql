-- After a failed keep_inputs.sql: its half-written file is removed (analysis.replay.derived); drop its attachment too,
-- so the connection goes on as if it had never tried.
DETACH DATABASE IF EXISTS kept_out
