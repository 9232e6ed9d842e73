-- What the price table could not price, per generation in the replay: its writer/critic model unpriced
-- (loop_unpriced), or a judge that used tokens with no price for it (judge_unpriced: a judge that makes no call,
-- like the lexical one, costs $0). What the report and shp-sweep say under their cost columns.
SELECT gp.gen_id, gp.provider_kind, gp.model, gp.judge_model,
       gp.loop_input_per_mtok IS NULL AS loop_unpriced,
       gp.judge_input_per_mtok IS NULL AND coalesce(t.judge_tokens, 0) > 0 AS judge_unpriced
FROM generation_prices gp
JOIN (SELECT gen_id, sum(cj[depth]) AS judge_tokens FROM replay_inputs GROUP BY gen_id) t ON t.gen_id = gp.gen_id
ORDER BY gp.gen_id
