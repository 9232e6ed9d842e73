-- The query shp-sweep suggests to explore a store with shp-query (printed on one line).
SELECT policy, avg(stop_round), avg(operational_tokens) FROM replay GROUP BY policy ORDER BY 3
