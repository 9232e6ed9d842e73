-- What the judgments in scope must show for trajectory_inputs rows to be believed (analysis.replay.stored_inputs), in one
-- scan: no (judge, judge_key) stored twice (else analysis.replay.uniqueness decides), at most one judgment per draft by the
-- chosen judge (so a round's verdict in its row is the one the views join), and whether that judge was ever paid
-- in batch mode (batch_calls.sql). Distinct hashes are distinct keys: a collision only answers "not unique".
-- Filled with judge_where (sql.judge_where).
SELECT count(*) = count(DISTINCT hash(judge, judge_key)),
       count(*) FILTER (WHERE $judge_where) = count(DISTINCT hash(scenario_id, draft_hash)) FILTER (WHERE $judge_where),
       coalesce(bool_or(judge_mode = 'batch') FILTER (WHERE $judge_where), false)
FROM judgments_raw
