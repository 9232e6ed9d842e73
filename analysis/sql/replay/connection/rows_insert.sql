-- Rows into a temp table made by this module's statements (prices, generation_prices). Filled by analysis.replay.costs:
-- table, values ("(...),\n  (...)").
INSERT INTO $table VALUES
  $values
