-- The datasets of the replayed trajectories' scenarios (sweeps.code_results names the data it renders).
SELECT DISTINCT dataset FROM scenarios WHERE scenario_id IN (SELECT scenario_id FROM replay_inputs) ORDER BY dataset
