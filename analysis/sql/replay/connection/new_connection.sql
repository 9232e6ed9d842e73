-- Every new connection: no progress noise on stderr in scripts and tests, and its own spill folder, set before
-- any work (DuckDB cannot switch it after a spill; the read-only lock-down allows exactly this folder).
-- Filled by analysis.replay.sandbox.new_connection: spill (the quoted folder, not created: DuckDB makes it to spill).
SET enable_progress_bar = false;
SET temp_directory = $spill;
