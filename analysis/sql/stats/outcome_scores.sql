-- The scores of the connection's trajectories (replay_scores: the scope's generation, scenarios and split) that
-- hold a value, sorted (analysis.stats.outcomes: each is an outcome of the report). A score whose every call failed
-- is no outcome: failed_scores.sql names it and what its scorer raised.
SELECT score FROM replay_scores
GROUP BY score
HAVING count(final_value) > 0 OR count(baseline_value) > 0
ORDER BY score
