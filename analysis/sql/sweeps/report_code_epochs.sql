-- The most trajectories the replayed scenarios hold of one task (generation.epochs; a scenario stored before epochs is
-- epoch 1 of its own task): sweeps.code_results states it in the section's header.
SELECT coalesce(max(epoch), 1) FROM scenarios WHERE scenario_id IN (SELECT scenario_id FROM replay_inputs)
