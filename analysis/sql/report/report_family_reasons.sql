-- The families section: why each family policy stopped, most frequent first.
SELECT gen_id, policy, reason, count(*) AS n FROM family_replay GROUP BY ALL ORDER BY gen_id, policy, n DESC
