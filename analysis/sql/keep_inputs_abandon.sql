-- After a failed keep_inputs.sql: its half-written file is removed (analysis.derived); undo its setting and its
-- attachment too, so the connection goes on as if it had never tried.
RESET force_compression;
DETACH DATABASE IF EXISTS kept_out
