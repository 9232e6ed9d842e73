-- The replay view when no policy is a family: the cascade/random/oracle rows alone (replay.sql, which carries the
-- answer metrics of the returned draft: final_has_answer_line, final_em, final_f1).
SELECT * FROM replay_core
