-- Per generation whose prompt preset names an approval marker other than APPROVED (generation.prompts.approval
-- in its config_json): gen_id and the RE2 regex of approved(f_t, marker), the text sql.approval_regex builds
-- (leading whitespace, then the marker in any case, its ASCII punctuation escaped). A generation without the key
-- (an older store, an import) is not listed: its critiques are read with APPROVED_REGEX, a constant.
-- Filled by sql.approval_markers_sql: space (the whitespace characters of the class).
SELECT gen_id,
       '^[' || $space || ']*(?i:' || regexp_replace(marker, '([!-/:-@\[-`{-~])', '\\\1', 'g') || ')' AS approved_regex
FROM (
    SELECT gen_id, any_value(json_extract_string(config_json, '$.generation.prompts.approval')) AS marker
    FROM generations
    GROUP BY gen_id
)
WHERE marker IS NOT NULL AND marker <> 'APPROVED'
