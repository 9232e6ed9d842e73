-- One value per (gen_id, scenario_id, round, score) of the stored scores (scores_raw; shp_ray.policy.scorers):
-- value NULL with error set where the scorer raised on that round, NULL without error where it could not know
-- (no gold answer); label: what the value stands for where the scorer says (the tests scorer: the run's error
-- class). A key stored twice (scored again by another scorer under the same name) reads as the row of
-- the smallest scorer identity, then the smallest value: every reader sees the same one.
SELECT gen_id, scenario_id, round, score, value, error, scorer, label
FROM scores_raw
QUALIFY row_number() OVER (PARTITION BY gen_id, scenario_id, round, score ORDER BY scorer, value NULLS LAST, error) = 1
