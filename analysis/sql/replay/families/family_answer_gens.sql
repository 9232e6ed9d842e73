-- The generations in the replay's scope that hold no stored answer (draft_answers): the answer-based families are
-- left out of the replay while any has none (analysis.replay.family_replay).
SELECT DISTINCT gen_id::VARCHAR FROM replay_inputs
WHERE gen_id::VARCHAR NOT IN (SELECT DISTINCT gen_id FROM draft_answers) ORDER BY 1
