-- Provenance: the judges whose scores give IS.
SELECT DISTINCT judge FROM judgments ORDER BY 1
