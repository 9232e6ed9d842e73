-- The stops replay_scores reads: every replay row's stop and the round whose draft it returns. Filled by
-- sql.replay_scores_sql: families (a UNION ALL of family_replay's rows, returning selected_round, or nothing).
SELECT policy, gen_id::VARCHAR AS gen_id, scenario_id, stop_round, stop_round AS returned_round, reason,
       operational_tokens, depth
FROM replay_core
$families
