"""The lenient reading of a draft's answer as SQL (answers_lenient.sql): an ``answers_lenient`` view of every
connection, read by the answer outcomes of analysis.stats."""

from __future__ import annotations

from analysis.sql import answer_scoring, query, quote
from shp_ray.policy.answer import INLINE_ANSWER, SENTENCE_BREAK, VISIBLE


def answers_lenient_sql(rounds: str = "round_parts") -> str:
    """Per draft of the relation ``rounds``: the lenient reading of its answer (an inline ``Answer:``, else the
    last sentence) and its EM / F1 against the scenario's gold answer (answers_lenient.sql)."""
    return query(
        "answers_lenient",
        rounds=rounds,
        inline=quote(INLINE_ANSWER),
        sentence_break=quote(SENTENCE_BREAK),
        visible=quote(VISIBLE),
        **answer_scoring(),
    )
