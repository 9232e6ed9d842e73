-- Common table expressions (they follow a `normalised` CTE with pred and ref): `tokens` splits both into their
-- word lists pt and rt, `counted` adds same, the size of the multiset intersection (Counter(pt) & Counter(rt)),
-- which answer_token_f1.sql turns into F1. Shared by the strict (answers.sql) and lenient (answers_lenient.sql)
-- readings, so the two score an extracted answer the same way.
tokens AS (
    SELECT *, list_filter(string_split(pred, ' '), lambda w: w <> '') AS pt,
           list_filter(string_split(ref, ' '), lambda w: w <> '') AS rt
    FROM normalised
), counted AS (
    SELECT *, coalesce(list_sum(list_transform(list_distinct(pt), lambda w:
               least(len(list_filter(pt, lambda x: x = w)), len(list_filter(rt, lambda x: x = w))))), 0) AS same
    FROM tokens
)
