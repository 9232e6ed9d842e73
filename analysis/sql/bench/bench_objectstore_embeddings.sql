-- shp-bench objectstore: what reading one generation's round-2 embeddings costs (parameter: gen_id).
SELECT list_sum(embedding) FROM round_parts WHERE gen_id = ? AND round = 2
