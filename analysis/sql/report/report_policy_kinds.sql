-- The families section: every policy's kind and parameters.
SELECT policy, kind, params_json FROM policies
