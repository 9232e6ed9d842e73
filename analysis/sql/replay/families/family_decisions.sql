-- The family executor's decisions (analysis.replay.family_replay computes them column-wise and hands them over as the
-- Arrow table family_decisions_arrow, registered only while this runs): policy, gen_id, scenario_id,
-- stop_round, reason, selected_round, verified_final.
SELECT * FROM family_decisions_arrow
