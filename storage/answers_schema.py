"""The ``draft_answers`` table: one row per (round, extractor), the answer a stored draft states.

Written beside the ``scores`` by the generation writer (and by ``shp-import --rescore`` for a store written before
it: no model call), read by the answer-based stopping families (``answer_stable``, ``answer_runlength``,
``adaptive_consistency``, ``sprt``). Its own table, so no stored part is rewritten and a store without it replays
as before, those families left out. ``extractor`` names the reading (``qa-lenient-v1``: the lenient QA answer,
normalised; ``code-ast-v1``: the sha256 of ``ast.dump`` of the code the verifier runs; ``python:<target>``: a
user's ``answer.target``); ``answer`` NULL: the draft states none (or the extractor raised: ``error`` says what).
"""

from __future__ import annotations

import pyarrow as pa

DRAFT_ANSWERS = pa.schema(
    [
        ("gen_id", pa.string()),
        ("scenario_id", pa.string()),
        ("round", pa.int32()),
        ("extractor", pa.string()),
        ("answer", pa.string()),
        ("error", pa.string()),
    ]
)
REQUIRED = ("gen_id", "scenario_id", "round", "extractor")
