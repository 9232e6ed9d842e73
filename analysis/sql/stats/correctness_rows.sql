-- The rows of one correctness view ($relation: correctness_summary, pass_by_round, break_rate) for one score (the
-- ? parameter), in a stable order (analysis.stats.correctness).
SELECT * FROM $relation WHERE score = ? ORDER BY ALL
