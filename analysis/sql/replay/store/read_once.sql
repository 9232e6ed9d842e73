-- A store table's rows with each key once (analysis.replay.uniqueness): only for a table that holds identical copies of
-- some rows (a retried write), which this reads once. Filled with source (the table's rows) and keys.
SELECT * FROM ($source) QUALIFY row_number() OVER (PARTITION BY $keys) = 1
