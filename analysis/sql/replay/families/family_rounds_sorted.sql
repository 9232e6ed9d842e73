-- family_rounds.sql sorted by trajectory and round: read when the store's own order does not keep a trajectory's
-- rounds together and in order (analysis.replay.family_stream). Filled by analysis.replay.family_stream: rounds (family_rounds).
SELECT * FROM ($rounds) ORDER BY gen_id, scenario_id, round
