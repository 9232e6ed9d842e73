-- One row per generation: the prices its calls are charged at (analysis.replay.costs looks them up in the price table):
-- loop_* the writer's and critic's (the generation's provider kind and model), judge_* the judge's (an LLM judge
-- runs on the generation's endpoint; the lexical judge has no model and makes no call). NULL: the table has no
-- price for it (cost unknown, never $0). replay_inputs carries them per trajectory.
CREATE OR REPLACE TEMP TABLE generation_prices (
    gen_id VARCHAR, provider_kind VARCHAR, model VARCHAR, judge_model VARCHAR,
    loop_input_per_mtok DOUBLE, loop_output_per_mtok DOUBLE, loop_batch_discount DOUBLE,
    judge_input_per_mtok DOUBLE, judge_output_per_mtok DOUBLE, judge_batch_discount DOUBLE
)
