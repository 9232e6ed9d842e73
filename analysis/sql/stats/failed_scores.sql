-- The scores of the connection's trajectories that hold no value at all (the scorer failed on every draft it was
-- given), with one of the errors it raised, sorted (analysis.stats.outcomes.failed_scores: left out, said why).
SELECT score, min(coalesce(final_error, baseline_error)) AS error
FROM replay_scores
GROUP BY score
HAVING count(final_value) = 0 AND count(baseline_value) = 0
ORDER BY score
