-- The pass/fail scores of the store (oracle_pass.sql: every known value 0 or 1), sorted (analysis.stats.correctness).
SELECT DISTINCT score FROM oracle_pass ORDER BY score
