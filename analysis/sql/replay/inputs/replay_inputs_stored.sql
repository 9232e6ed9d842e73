-- replay_inputs' trajectories from the store's trajectory_inputs rows (replay_inputs.sql's g, as
-- replay_inputs_grouped.sql gives it from the per-round signals): no grouping, no join. r_t is round t's stored
-- struct (storage.schemas.INPUT_ROUND; NULL past the trajectory's depth) with the same values as the grouped one,
-- but the judge's metrics in place of IS_t, which replay_inputs_sql computes under the connection's weights.
-- crit: the first approving round + 1 (NULL when none approved). Filled by sql.replay_inputs_sql: inputs (the
-- trajectory_inputs rows in scope, checked by analysis.replay.stored_inputs), per_round (rounds[t] AS r_t, t = 1..T).
SELECT gen_id, scenario_id, depth, first_approved + 1 AS crit, $per_round
FROM ($inputs)
