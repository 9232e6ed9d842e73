-- The report's question: which policy saves most tokens at non-inferior IS? (printed in the report as is; the report
-- asks it of each split apart, and the answer names its split)
SELECT gen_id, split, policy, token_saving, mean_is, delta_is, delta_is_lower95 FROM policy_summary WHERE non_inferior AND policy NOT LIKE 'fixed_k%' AND policy <> 'oracle_is' ORDER BY token_saving DESC, policy LIMIT 1
