-- analysis.stats: per generation and round, the count, mean and standard deviation of the known d_t.
SELECT gen_id, round, count(distance), avg(distance), stddev_samp(distance)
FROM rounds WHERE distance IS NOT NULL AND NOT isnan(distance)
GROUP BY gen_id, round ORDER BY gen_id, round
