-- An expression: tokens in US dollars at a model's prices per million tokens, prompt tokens at the input price and
-- the rest at the output price (list price: a batch call is this x (1 - batch_discount)). An unpriced model (NULL
-- price) costs NULL, never $0; a judge that is no model and made no call (the lexical judge) has the price 0 in
-- generation_prices (analysis.replay.costs), so it costs $0. Filled by analysis.sql.cost_text: tokens, prompt, input,
-- output (the price columns).
($prompt * $input + ($tokens - $prompt) * $output) / 1000000.0
