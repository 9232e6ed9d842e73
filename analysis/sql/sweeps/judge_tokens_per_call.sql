-- What one call of the connection's judge costs on average, over the rounds it judged (NULL: the lexical
-- judge, which makes no call).
SELECT avg(judge_tokens) FILTER (WHERE judge_tokens > 0) FROM round_signals
