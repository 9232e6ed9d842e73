-- Every score at each policy's stop: one row per replay row x score of its generation, and per score s the oracle
-- oracle_<s> (stop at the first round of the highest s over rounds 1..depth; like oracle_is it must run every
-- round to know, so it pays baseline_tokens: every writer, every critic but the last; an all-NULL score stops at
-- round 1). final_value: the score of the returned draft (a family's selected_round, else stop_round);
-- baseline_value: of the baseline fixed_k{depth}'s last draft; *_error: what the scorer raised there (value NULL);
-- returned_round: the round whose draft final_value scores (correctness.sql reads the IS there); drawn_from: the
-- generation whose draft that is (gen_id, but for resample_equal_compute: the critic=none generation it resamples).
-- Filled by sql.replay_scores_sql: stops (policy, gen_id, scenario_id, stop_round, returned_round, reason,
-- operational_tokens, depth of every replay row), control (resample_control.sql's rows).
WITH names AS (
    SELECT DISTINCT gen_id, score FROM scores
), stops AS (
    $stops
), best AS (
    SELECT gen_id, scenario_id, score, coalesce(min(round) FILTER (WHERE value = top), 1) AS stop_round
    FROM (SELECT *, max(value) OVER (PARTITION BY gen_id, scenario_id, score) AS top FROM scores)
    GROUP BY gen_id, scenario_id, score
), oracle AS (
    SELECT 'oracle_' || b.score AS policy, b.gen_id, b.scenario_id, b.stop_round, b.stop_round AS returned_round,
           'oracle' AS reason, x.baseline_tokens AS operational_tokens, x.depth, b.gen_id AS drawn_from
    FROM best b JOIN replay_inputs x ON x.gen_id::VARCHAR = b.gen_id AND x.scenario_id = b.scenario_id
    WHERE b.stop_round <= x.depth
), every AS (
    SELECT *, gen_id AS drawn_from FROM stops WHERE gen_id IN (SELECT gen_id FROM names)
    UNION ALL
    SELECT * FROM oracle
    UNION ALL
    SELECT * FROM ($control) WHERE gen_id IN (SELECT gen_id FROM names)
)
SELECT e.policy, e.gen_id, e.scenario_id, n.score, e.stop_round, e.returned_round, e.reason, e.operational_tokens, e.depth,
       f.value AS final_value, f.error AS final_error, b.value AS baseline_value, b.error AS baseline_error,
       e.drawn_from
FROM every e
JOIN names n ON n.gen_id = e.gen_id
LEFT JOIN scores f ON f.gen_id = e.drawn_from AND f.scenario_id = e.scenario_id AND f.round = e.returned_round
                      AND f.score = n.score
LEFT JOIN scores b ON b.gen_id = e.gen_id AND b.scenario_id = e.scenario_id AND b.round = e.depth AND b.score = n.score
