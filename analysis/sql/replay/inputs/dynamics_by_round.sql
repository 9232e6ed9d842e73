-- Mean d_t and IS_t by round per generation (the trace of a run: do distances shrink, does IS move?).
-- d_t is NULL at round 1 (no previous draft); NaN distances and unjudged IS are left out of the means.
SELECT gen_id, round,
       count(*) AS trajectories,
       avg(distance) FILTER (WHERE round > 1 AND NOT isnan(distance)) AS mean_distance,
       median(distance) FILTER (WHERE round > 1 AND NOT isnan(distance)) AS median_distance,
       avg(is_score) FILTER (WHERE NOT isnan(is_score)) AS mean_is,
       avg(approved::INTEGER) AS approval_rate
FROM round_signals
GROUP BY gen_id, round
ORDER BY gen_id, round
