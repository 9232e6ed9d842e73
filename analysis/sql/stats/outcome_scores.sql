-- The scores of the connection's trajectories (replay_scores: the scope's generation, scenarios and split), sorted
-- (analysis.stats.outcomes: each is an outcome of the report).
SELECT DISTINCT score FROM replay_scores ORDER BY score
