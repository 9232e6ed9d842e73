-- replay's rows with the user's scores as one map per row (replay_scores.sql long, here wide): scores['pass'].final
-- is the score of the returned draft, .baseline of the baseline fixed_k{depth}'s last draft. A view of its own, not
-- a column of replay: the replay is the hot path (100k-10M trajectories) and most queries of it read no score.
-- Only the rows of generations with scores, the oracle_<score> rows included (replay_scores).
SELECT policy, gen_id, scenario_id,
       map_from_entries(list((score, {'final': final_value, 'baseline': baseline_value}) ORDER BY score)) AS scores
FROM replay_scores
GROUP BY policy, gen_id, scenario_id
