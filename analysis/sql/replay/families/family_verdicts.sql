-- The loop's own verdict on each round's draft, where its generation stored one (the score $score: a code loop's
-- visible tests, shp_ray.policy.families.verifier.VISIBLE_TESTS_SCORE): ok is 1.0 when every visible test passed
-- (value 1), else 0.0 (a failed or unknown run verifies nothing). analysis.replay.family_replay hands them to the
-- verifier-first families in place of their verifier; a round of such a generation without a row counts 0.0.
SELECT gen_id, scenario_id, round, CASE WHEN value = 1 THEN 1.0 ELSE 0.0 END::DOUBLE AS ok
FROM scores WHERE score = $score
