-- The exact one-sided 95% t quantiles (scipy) for df = 1..max: rows is "(df, t95), ...". Filled by sql.t95_table_sql.
CREATE OR REPLACE TEMP TABLE t95_table AS SELECT * FROM (VALUES $rows) v(df, t95)
