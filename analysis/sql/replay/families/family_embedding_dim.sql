-- The embedding size of the rounds, from one row (1 when there is none): the family executor's block width.
SELECT coalesce(max(len(embedding)), 1) FROM (SELECT embedding FROM round_parts LIMIT 1)
