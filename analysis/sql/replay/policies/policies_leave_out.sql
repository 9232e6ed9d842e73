-- Take the policies of the family kinds $kinds out of the replay (analysis.replay.family_replay.leave_out_unanswered:
-- the answer-based families, while a generation in scope has no stored answers).
DELETE FROM policies WHERE kind IN ($kinds)
