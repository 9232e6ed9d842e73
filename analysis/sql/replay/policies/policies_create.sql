-- The policies table (one row per policy or sweep cell). Filled by sql.policies_table: columns ("name TYPE, ...").
CREATE OR REPLACE TEMP TABLE policies ($columns);
