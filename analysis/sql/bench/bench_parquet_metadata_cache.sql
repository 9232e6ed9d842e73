-- shp-bench objectstore, the fsspec reader: DuckDB keeps the Parquet footers it read for the connection.
SET parquet_metadata_cache = true
