-- Compute replay_inputs straight into a new DuckDB database file (analysis.replay.derived: kept per part set; every
-- connection, this one too, attaches it read-only and reads it in place: kept_inputs.sql).
-- DuckDB's own format, not Parquet: measured at 100k trajectories, a view over the attached table costs nothing to
-- open, where reading a Parquet copy back into a temp table took 0.3 s (its lists decoded and rebuilt). Compressed
-- as DuckDB chooses: half the disk of forcing it uncompressed (297 MB against 679 MB at 1M trajectories), written
-- and replayed as fast within the noise. gen_id keeps the connection's ENUM (the key covers the generations, so
-- every reader's ENUM is the same). Filled by analysis.replay.derived: path (a quoted temp path, renamed once written and
-- detached), select (what replay_inputs holds: views.build_statements), key (quoted: what it is computed for, read
-- back by kept_inputs_key.sql before the file is believed).
ATTACH $path AS kept_out;
CREATE TABLE kept_out.replay_inputs AS $select;
CREATE TABLE kept_out.kept_key AS SELECT $key AS key;
DETACH kept_out
