-- The keys a store table's view holds more than once (analysis.replay.uniqueness.check), reading its key columns only.
-- Grouped by the keys' hash first (a third of the time of grouping the strings of 600k judgments); only a hash
-- seen twice is looked at again, by its keys (none, almost always: the second scan then finds nothing to join).
-- Filled with relation (round_parts | judgments_raw | signals_raw) and keys (the table's key columns).
SELECT DISTINCT $keys FROM $relation
WHERE hash($keys) IN (SELECT h FROM (SELECT hash($keys) AS h FROM $relation) GROUP BY h HAVING count(*) > 1)
