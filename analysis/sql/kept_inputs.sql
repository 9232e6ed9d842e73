-- replay_inputs read back from the file analysis.derived kept for these parts and statements.
-- Filled by analysis.db: path (quoted).
SELECT * FROM read_parquet($path)
