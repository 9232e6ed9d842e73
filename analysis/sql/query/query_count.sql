-- How many rows a query gives (shp-query, when --max-rows cut its output: analysis.query.bounds). Filled with query
-- (one read-only query, checked before; on lines of its own, so a trailing comment cannot swallow the parenthesis).
SELECT count(*) FROM (
$query
)
