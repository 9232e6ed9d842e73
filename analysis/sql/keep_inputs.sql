-- Write replay_inputs to a Parquet file (analysis.derived: kept per part set, read back by later connections).
-- Uncompressed: measured at 100k trajectories, it writes in 0.34 s against 0.51-0.58 s for lz4/zstd and reads back
-- as fast (0.3 s); the file is 20 % larger (35 MB) and derived, so disk is the cheaper side.
-- Filled by analysis.derived: path (a quoted temp path, renamed once written).
COPY replay_inputs TO $path (FORMAT parquet, COMPRESSION uncompressed)
