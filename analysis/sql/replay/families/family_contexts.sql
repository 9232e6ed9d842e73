-- Each scenario's contexts, for the family executor's verifier and grounding (as family_inputs.sql reads them).
SELECT scenario_id, coalesce(any_value(contexts), []::VARCHAR[]) AS contexts FROM scenarios GROUP BY scenario_id
