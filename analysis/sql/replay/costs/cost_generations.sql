-- The generations the price table is looked up for: gen_id, model and provider kind (from gen_id_parts; a
-- synthetic store's generation has none, so no price). Filled by analysis.replay.costs: generations (the table's source).
SELECT gen_id, any_value(model) AS model,
       any_value(json_extract_string(config_json, '$.gen_id_parts.provider_kind')) AS provider_kind
FROM ($generations) GROUP BY gen_id ORDER BY gen_id
