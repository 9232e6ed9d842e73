-- An expression: the one-sided 95% t quantile at df (an SQL expression), exact from t95_table up to max_df,
-- else cornish_fisher (the expansion in df). Filled by sql.t95_sql.
CASE WHEN ($df) < 1 THEN NULL WHEN ($df) <= $max_df THEN (SELECT tt.t95 FROM t95_table tt WHERE tt.df = ($df)) ELSE $cornish_fisher END
