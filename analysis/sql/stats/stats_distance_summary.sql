-- analysis.stats: count, mean, median, max and share below eps (the ? parameter) of every known d_t.
SELECT count(distance), avg(distance), median(distance), max(distance), avg((distance < ?)::INTEGER)
FROM rounds WHERE distance IS NOT NULL AND NOT isnan(distance)
