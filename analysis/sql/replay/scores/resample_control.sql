-- resample_equal_compute (shp_ray.policy.resample, its reference; docs/policies.md): per trajectory of a revising
-- generation (critic not 'none') whose task and epoch (scenario_id) a critic=none generation of the same model and
-- max_rounds also ran (the smallest such gen_id: resampled_from), the fresh drafts its budget buys and the one
-- returned. budget: the revising trajectory's baseline_tokens (fixed_k{depth}: every writer, every critic but the
-- last); n: the resampling trajectory's rounds whose loop tokens to that round (lt, cumulative) fit the budget, at
-- least 1; returned_round: its first round <= n whose $verdict is 1 (the loop's verifier: all visible tests pass),
-- else n. Rows as replay_scores_stops' plus drawn_from, the generation whose draft is returned and scored.
WITH gens AS (
    SELECT gen_id::VARCHAR AS gen_id, model, max_rounds,
           coalesce(json_extract_string(config_json, '$.generation.critic'),
                    json_extract_string(config_json, '$.gen_id_parts.critic')) AS critic
    FROM generations
), pairs AS (
    SELECT g.gen_id, min(r.gen_id) AS resampled_from
    FROM gens g JOIN gens r ON r.critic = 'none' AND g.critic IS DISTINCT FROM 'none'
                           AND r.model = g.model AND r.max_rounds = g.max_rounds
    GROUP BY g.gen_id
), drawn AS (
    SELECT p.gen_id, x.scenario_id, x.depth, p.resampled_from, y.lt AS drawn_tokens,
           greatest(1, len(list_filter(y.lt[1:y.depth], lambda c: c <= x.baseline_tokens))) AS n
    FROM pairs p
    JOIN replay_inputs x ON x.gen_id::VARCHAR = p.gen_id
    JOIN replay_inputs y ON y.gen_id::VARCHAR = p.resampled_from AND y.scenario_id = x.scenario_id
), verified AS (
    SELECT d.gen_id, d.scenario_id, min(v.round) FILTER (WHERE v.value = 1) AS first_verified
    FROM drawn d
    LEFT JOIN scores v ON v.gen_id = d.resampled_from AND v.scenario_id = d.scenario_id AND v.score = '$verdict'
                          AND v.round <= d.n
    GROUP BY d.gen_id, d.scenario_id
)
SELECT '$policy' AS policy, d.gen_id, d.scenario_id, d.n AS stop_round,
       coalesce(f.first_verified, d.n) AS returned_round, '$reason' AS reason,
       d.drawn_tokens[d.n]::BIGINT AS operational_tokens, d.depth, d.resampled_from AS drawn_from
FROM drawn d JOIN verified f ON f.gen_id = d.gen_id AND f.scenario_id = d.scenario_id
