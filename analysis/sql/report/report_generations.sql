-- Provenance: the generation configs of the replayed trajectories, with the provider kind.
SELECT DISTINCT gen_id, model, embedder, max_rounds, prompt_version,
       json_extract_string(config_json, '$.gen_id_parts.provider_kind') AS provider_kind
FROM generations
WHERE gen_id IN (SELECT DISTINCT gen_id FROM trajectories) ORDER BY gen_id
