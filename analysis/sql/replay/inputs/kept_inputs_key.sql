-- The key the attached kept replay_inputs file was computed for (keep_inputs.sql writes it beside the table):
-- analysis.replay.derived reads the file only if it is the key it was asked by.
SELECT key FROM kept_inputs.kept_key
