-- The report's splits: the scenarios of the replayed trajectories of each split (scenario_splits.sql), so a store
-- holding dev and test is reported split by split (one connection each), never pooled.
SELECT sp.split, list(DISTINCT x.scenario_id ORDER BY x.scenario_id) AS scenario_ids
FROM (SELECT DISTINCT scenario_id FROM replay_inputs) x LEFT JOIN scenario_splits sp ON sp.scenario_id = x.scenario_id
GROUP BY sp.split ORDER BY sp.split NULLS LAST
