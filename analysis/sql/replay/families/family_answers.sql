-- Each round's stated answer, for the answer-based stopping families (shp_ray.policy.families.agreement): one
-- extractor per generation, a user's (python:..., the first by name) before the task's own (code-ast-v1, then
-- qa-lenient-v1), as shp_ray.generation.answer_config.pick_extractor picks it. A generation with no rows here has
-- no stored answers: analysis.replay.family_replay leaves those families out rather than run them on none.
WITH picked AS (
    SELECT gen_id, extractor,
           row_number() OVER (
               PARTITION BY gen_id
               ORDER BY starts_with(extractor, 'python:') DESC, extractor = 'code-ast-v1' DESC, extractor
           ) AS pick
    FROM (SELECT DISTINCT gen_id, extractor FROM draft_answers)
)
SELECT a.gen_id, a.scenario_id, a.round, any_value(a.answer) AS answer
FROM draft_answers a JOIN picked p ON p.gen_id = a.gen_id AND p.extractor = a.extractor AND p.pick = 1
GROUP BY a.gen_id, a.scenario_id, a.round
