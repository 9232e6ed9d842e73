-- The answers view: whether each round's draft is right (HotpotQA EM / F1 against the gold answer), from
-- round_signals (stored with the signals, or computed in SQL by answers.sql for rounds without them).
SELECT gen_id, scenario_id, round, has_answer_line, answer_em, answer_f1 FROM round_signals
