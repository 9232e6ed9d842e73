-- shp-query's .tables: the views and tables a query can read.
SELECT table_name FROM information_schema.tables ORDER BY 1
