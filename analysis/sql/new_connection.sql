-- Every new connection: no progress noise on stderr in scripts and tests.
SET enable_progress_bar = false
