-- How many replay rows (shp-bench families times it).
SELECT count(*) FROM replay
