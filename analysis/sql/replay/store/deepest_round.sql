-- The highest round of a relation of rounds (1 when it is empty): how many round columns replay_inputs has.
-- Filled by analysis.replay.views.deepest: relation.
SELECT coalesce(max(round), 1) FROM $relation
