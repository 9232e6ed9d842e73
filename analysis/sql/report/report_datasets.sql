-- Provenance: the datasets the store's scenarios come from.
SELECT DISTINCT dataset FROM scenarios ORDER BY 1
