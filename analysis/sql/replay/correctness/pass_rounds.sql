-- Every round of every trajectory under each pass/fail score of its generation: a score whose known values are all
-- 0 or 1 (hidden_pass, visible_pass when all-or-nothing, a user's own 0/1 correctness score). One row per
-- (gen_id, scenario_id, round 1..depth, score); passed: the round's value is 1. A round whose value is unknown (the
-- scorer raised, or no row was stored) counts as not passing (unknown says which): a draft that cannot be shown to
-- pass is not counted as a pass. split: the scenario's (scenario_splits.sql), so nothing below pools dev and test.
WITH pass_fail AS (
    SELECT gen_id, score FROM scores
    GROUP BY gen_id, score
    HAVING count(value) > 0 AND bool_and(value IS NULL OR value IN (0, 1))
), trajectories AS (
    SELECT x.gen_id::VARCHAR AS gen_id, x.scenario_id, x.depth, b.score
    FROM replay_inputs x JOIN pass_fail b ON b.gen_id = x.gen_id::VARCHAR
)
SELECT t.gen_id, t.scenario_id, sp.split, t.score, r.round, t.depth,
       coalesce(s.value = 1, false) AS passed, s.value IS NULL AS unknown
FROM trajectories t
CROSS JOIN LATERAL (SELECT unnest(range(1, t.depth + 1)) AS round) r
LEFT JOIN scores s ON s.gen_id = t.gen_id AND s.scenario_id = t.scenario_id AND s.round = r.round AND s.score = t.score
LEFT JOIN scenario_splits sp ON sp.scenario_id = t.scenario_id
