-- The other stopping families x trajectories through the Arrow UDF shp_family (analysis.family_replay),
-- same columns as replay.sql plus selected_round, outcome, verified_final, params_json.
-- Filled by sql.family_replay_sql: kinds (the registered family kinds, quoted), outcome_kinds (those whose
-- reasons are outcomes: verifier-first).
WITH pt AS (
    SELECT p.policy, p.kind, p.params_json, p.max_rounds, least(p.max_rounds, x.depth) AS cap,
           x.gen_id, x.scenario_id, x.depth, x.s, x.cw, x.cc, x.j, x.hl, x.em, x.f1, x.baseline_tokens, x.baseline_is,
           x.baseline_em, x.baseline_f1,
           fi.drafts, fi.embs, fi.fb_embs, fi.wt, fi.ct, fi.contexts
    FROM policies p CROSS JOIN trajectories x
    JOIN family_inputs fi ON fi.gen_id = x.gen_id AND fi.scenario_id = x.scenario_id
    WHERE p.kind IN ($kinds)
    ORDER BY x.gen_id, x.scenario_id  -- a trajectory's rows together: the UDF computes its signals once
), decided AS (
    SELECT *, shp_family(gen_id, scenario_id, kind, params_json, max_rounds, cap, drafts, embs, fb_embs, wt, ct,
                         contexts) AS res
    FROM pt
), parsed AS (
    SELECT *, split_part(res, '|', 1)::INTEGER AS stop_round, split_part(res, '|', 2) AS reason,
           split_part(res, '|', 3)::INTEGER AS selected_round, split_part(res, '|', 4) = 'true' AS verified_final
    FROM decided
)
SELECT policy, gen_id, scenario_id, stop_round, reason,
       -- judge-free: every writer up to tau, every critic before it, never the judge
       (cw[stop_round] + CASE WHEN stop_round > 1 THEN cc[stop_round - 1] ELSE 0 END)::BIGINT AS operational_tokens,
       j[selected_round]::BIGINT AS evaluation_tokens,
       s[selected_round] AS final_is,
       depth, baseline_tokens::BIGINT AS baseline_tokens, baseline_is, baseline_em, baseline_f1,
       selected_round,
       hl[selected_round] AS final_has_answer_line, em[selected_round] AS final_em, f1[selected_round] AS final_f1,
       CASE WHEN kind IN ($outcome_kinds) THEN reason END AS outcome,
       verified_final, params_json
FROM parsed
