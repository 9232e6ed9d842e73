-- An expression: HotpotQA's normalize_answer of $text, as shp_ray.policy.answer.normalize_answer computes it
-- (lower-case, ASCII punctuation out, the articles a/an/the out, whitespace collapsed to single spaces).
-- Filled by sql.answer_normalize_sql: text, punctuation (string.punctuation), articles, space (regexes).
-- The articles: RE2 has no Unicode \b, so the regex matches the boundary characters around an article and puts
-- them back (\1 \3) with a space for the article, as Python's re.sub(r"\b(a|an|the)\b", " ") leaves them; a
-- second pass catches the article whose leading boundary the previous match used up ("a an b").
array_to_string(list_filter(regexp_split_to_array(
    regexp_replace(regexp_replace(translate(lower($text), $punctuation, ''), $articles, '\1 \3', 'g'),
                   $articles, '\1 \3', 'g'),
    $space), lambda w: w <> ''), ' ')
