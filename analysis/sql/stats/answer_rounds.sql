-- Each draft's lenient answer and its draft hash, in round order (the revision dynamics: a changed answer
-- beside a changed draft).
SELECT a.scenario_id, a.round, a.answer, p.draft_hash
FROM answers_lenient a JOIN round_signals p USING (gen_id, scenario_id, round)
ORDER BY a.gen_id, a.scenario_id, a.round
