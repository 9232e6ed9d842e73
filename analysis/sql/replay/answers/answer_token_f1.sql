-- An expression: HotpotQA's token F1 of the normalised strings pred and ref (their token lists pt and rt, same: the
-- size of their multiset intersection, from answer_tokens.sql), as shp_ray.policy.answer computes it: 0 for a
-- one-word verdict ($no_partial: yes / no / noanswer) that differs, 0 without a shared token, else 2PR / (P + R)
-- in the script's order of operations, so it equals the Python value bit for bit. Filled by sql.answer_f1_sql.
CASE WHEN (pred IN ($no_partial) OR ref IN ($no_partial)) AND pred <> ref THEN 0::DOUBLE
     WHEN same = 0 THEN 0::DOUBLE
     ELSE (2 * (same::DOUBLE / len(pt)) * (same::DOUBLE / len(rt)))
          / ((same::DOUBLE / len(pt)) + (same::DOUBLE / len(rt))) END
