-- A sweep job's entropy weights: the judge's metric matrix of its generation, one row per round.
SELECT faithfulness, answer_relevancy, context_precision, context_recall FROM rounds
