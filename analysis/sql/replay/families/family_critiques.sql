-- The stored critique embeddings the family executor may pair with a round (by the generation's embedder and the
-- critique's text hash, as family_inputs.sql joins them): gen_id, text_hash, g.
WITH gens AS (SELECT gen_id, any_value(embedder) AS embedder FROM generations GROUP BY gen_id),
fe AS (
    SELECT embedder, text_hash, any_value(embedding)::FLOAT[] AS g FROM feedback_embeddings GROUP BY ALL
)
SELECT gens.gen_id, fe.text_hash, fe.g FROM gens JOIN fe ON fe.embedder = gens.embedder
