-- shp-bench objectstore: a query the reader can push down to the parts (a count and a sum of one
-- generation's rounds; parameter: gen_id).
SELECT count(*), sum(writer_prompt_tokens) FROM round_parts WHERE gen_id = ?
