-- A table's parts with the columns it gained after some of them were written (storage.schemas.ADDED_COLUMNS):
-- UNION ALL BY NAME with a typed empty row set makes every such column exist even when no part has it, NULL in
-- the rows of a part without it; replace gives those rows the value such a part means (the call modes of a
-- store written before modes existed: 'live'). DuckDB drops the empty side, so the scan is the parts' own.
-- Filled by sql.table_source: parts (SELECT * FROM read_parquet(...)), replace (REPLACE (coalesce(...) AS c)
-- or ""), columns (NULL::<type> AS <column>, one per added column).
SELECT * $replace FROM ($parts UNION ALL BY NAME SELECT $columns WHERE false)
