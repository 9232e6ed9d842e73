-- The keys a store table's view holds more than once (analysis.uniqueness.check): its key columns only are read.
-- Filled with relation (round_parts | judgments_raw | signals_raw) and keys (the table's key columns).
SELECT $keys FROM $relation GROUP BY $keys HAVING count(*) > 1
