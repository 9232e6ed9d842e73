-- Every view and table of the connection (does it have family_inputs?).
SELECT view_name FROM duckdb_views() UNION ALL SELECT table_name FROM duckdb_tables()
