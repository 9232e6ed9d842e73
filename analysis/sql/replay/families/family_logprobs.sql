-- Each round's token log-probability summaries (draft_logprobs, storage.logprobs_schema), for the token-confidence
-- family (shp_ray.policy.families.confidence). A generation with no rows here asked for none, or its provider
-- returned none: analysis.replay.family_replay leaves that family out rather than run it on zeros.
SELECT gen_id, scenario_id, round, any_value(mean), any_value("min"), any_value(tail10), any_value(last_k)
FROM draft_logprobs
GROUP BY gen_id, scenario_id, round
