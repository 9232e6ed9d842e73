-- The generations in scope (analysis.replay.views.store_facts): every gen_id of the rounds and the stored signals, sorted.
-- replay_inputs carries gen_id as an ENUM of these (sql.gen_id_type).
SELECT DISTINCT gen_id FROM (SELECT gen_id FROM round_parts UNION ALL SELECT gen_id FROM signals_raw) ORDER BY 1
