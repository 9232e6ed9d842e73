-- The rows of the policies table. Filled by sql.policies_table: values ("(...),\n  (...)").
INSERT INTO policies VALUES
  $values;
