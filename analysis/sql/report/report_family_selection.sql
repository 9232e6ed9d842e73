-- The families section: stop round vs the round returned (best-round selection), and how often it was verified.
SELECT gen_id, policy, avg(stop_round) AS mean_stop, avg(selected_round) AS mean_selected,
       avg((selected_round < stop_round)::INTEGER) AS share_earlier, avg(verified_final::INTEGER) AS share_verified
FROM family_replay GROUP BY ALL
