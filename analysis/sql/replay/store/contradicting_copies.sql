-- The first key whose copies differ (analysis.replay.uniqueness): one part per different version of the row (the first
-- part by name holding it), and how many keys differ. Identical copies (a retried write) are one version; rows are
-- compared whole (NaN equals NaN, NULL equals NULL, as GROUP BY compares).
-- Filled with copies (every row of the keys found twice, with the part each came from), keys (the table's key
-- columns), values (every column of the table, the keys among them) and part (the column naming the part).
WITH versions AS (SELECT $keys, min($part) AS part FROM ($copies) GROUP BY $values)
SELECT $keys, list(part ORDER BY part) AS parts, count(*) OVER () AS keys_differing
FROM versions GROUP BY $keys HAVING count(*) > 1
ORDER BY $keys LIMIT 1
