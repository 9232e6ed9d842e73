-- The generations in the replay's scope with a trajectory whose drafts hold no token log-probabilities
-- (draft_logprobs): asked for by none of its calls, or by a rerun that skipped what was already stored. The
-- token-confidence family is left out of the replay while any has one (analysis.replay.family_replay): it would run
-- such a trajectory on nothing, to its cap.
SELECT DISTINCT i.gen_id::VARCHAR FROM replay_inputs i
WHERE NOT EXISTS (
    SELECT 1 FROM draft_logprobs l WHERE l.gen_id = i.gen_id::VARCHAR AND l.scenario_id = i.scenario_id::VARCHAR
)
ORDER BY 1
