-- The rounds rows of trajectories without stored signals (signal_status): what signals_from_rounds computes.
SELECT r.* FROM round_parts r
SEMI JOIN (SELECT gen_id, scenario_id FROM signal_status WHERE NOT stored AND NOT orphaned) k
ON k.gen_id = r.gen_id AND k.scenario_id = r.scenario_id
