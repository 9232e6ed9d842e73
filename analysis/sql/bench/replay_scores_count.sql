-- The rows of replay_scores (shp-bench correctness: the replay at every score, what the correctness views read).
SELECT count(*) FROM replay_scores
