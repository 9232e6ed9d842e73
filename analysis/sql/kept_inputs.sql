-- replay_inputs read back from the file analysis.derived kept for these parts and statements; gen_id as the
-- connection's ENUM of the generations (Parquet keeps it as text). Filled by analysis.db: path (quoted), gen_type.
SELECT * REPLACE (gen_id::$gen_type AS gen_id) FROM read_parquet($path)
