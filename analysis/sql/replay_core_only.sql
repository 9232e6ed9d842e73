-- The replay view when no policy is a family: the cascade/random/oracle rows alone, with the answer metrics of
-- the returned draft (the draft of round stop_round; answers.sql): final_has_answer_line, final_em, final_f1.
SELECT c.*, a.has_answer_line AS final_has_answer_line, a.answer_em AS final_em, a.answer_f1 AS final_f1
FROM replay_core c
LEFT JOIN answers a ON a.gen_id = c.gen_id AND a.scenario_id = c.scenario_id AND a.round = c.stop_round
