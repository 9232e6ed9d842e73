-- replay_inputs read in place from the database file analysis.replay.derived kept for these parts and statements:
-- attached read-only (any number of processes may), a view over its table. Filled by analysis.replay.db: path (quoted).
ATTACH $path AS kept_inputs (READ_ONLY);
CREATE OR REPLACE VIEW replay_inputs AS SELECT * FROM kept_inputs.replay_inputs
