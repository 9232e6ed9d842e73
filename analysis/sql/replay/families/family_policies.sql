-- The policies the family executor runs: those of the registered family kinds, in a fixed order.
-- Filled by sql.family_policies_sql: kinds (the registered family kinds, quoted).
SELECT policy, kind, params_json, max_rounds FROM policies WHERE kind IN ($kinds) ORDER BY policy
