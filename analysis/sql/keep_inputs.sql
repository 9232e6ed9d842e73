-- Write replay_inputs to a Parquet file (analysis.derived: kept per part set, read back by later connections).
-- Filled by analysis.derived: path (a quoted temp path, renamed once written).
COPY replay_inputs TO $path (FORMAT parquet, COMPRESSION zstd)
