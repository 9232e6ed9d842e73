-- Whether the chosen judge has at most one judgment per (scenario_id, draft_hash): then round_signals needs no pick
-- (judgment_pick.sql). Distinct hashes of the pair are distinct pairs, so `true` is exact; a hash collision only
-- answers `false` and keeps the pick. Filled with judge_where (sql.judge_where).
SELECT count(*) = count(DISTINCT hash(scenario_id, draft_hash)) FROM judgments_raw WHERE $judge_where
