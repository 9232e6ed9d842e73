"""Judge-free text helpers shared by the stopping families: cleaning, canonical hashes, words."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence

# Headers a Writer often repeats verbatim on every revision. They carry no answer content,
# but they are a large share of a short draft's tokens, so they pull embeddings together.
_BOILERPLATE = re.compile(
    r"^\s*(?:\*\*|#+\s*)?(?:revised|improved|updated|final|refined|corrected)?\s*"
    r"(?:answer|draft|response|version)\s*(?:\(revised\))?\s*(?:\*\*)?\s*[:\-]\s*",
    re.IGNORECASE,
)
_LEAD_INS = re.compile(
    r"^\s*(?:here is|here's|below is)\s+(?:the|my|an?)\s+(?:revised|improved|updated|final)?\s*"
    r"(?:answer|draft|response|version)[^:\n]*:\s*",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = (
    "a an the of in on at to for from by with and or but is are was were be been being it its this that these "
    "those as which who whom whose what when where why how not no yes do does did has have had he she they them "
    "his her their there than then so such also into about over after before during between while i we you "
    "our your my me us can could would should may might will shall answer final"
)
STOPWORDS = frozenset(_STOP.split())


def clean_text(text: str) -> str:
    """Strip boilerplate headers ("Revised answer:", "Here is the improved draft:") per line."""
    lines = []
    for line in text.splitlines():
        line = _LEAD_INS.sub("", line)
        line = _BOILERPLATE.sub("", line)
        lines.append(line)
    return "\n".join(lines).strip()


def canonical(text: str) -> str:
    """Case, whitespace and punctuation folded: two drafts that differ only in those are one state."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(folded))


def canonical_hash(text: str) -> str:
    return hash_canonical(canonical(text))


def hash_canonical(canon: str) -> str:
    """The hash of a canonical form: ``" ".join(words(text))`` IS ``canonical(text)`` (one fold, one regex),
    so the column-wise executor hashes the words it already split."""
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def content_words(text: str) -> list[str]:
    """Words that carry content: not stopwords; single letters only when digits."""
    return content_of(words(text))


def content_of(ws: Sequence[str]) -> list[str]:
    """:func:`content_words` of text already split by :func:`words`."""
    return [w for w in ws if w not in STOPWORDS and (len(w) > 1 or w.isdigit())]


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance over tokens (O(len(a) * len(b)), drafts are short)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        cur = [i]
        for j, y in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def token_edit_ratio(a: str, b: str) -> float:
    """Word-level edit distance normalised by the longer draft (0 = same words, 1 = all changed)."""
    wa, wb = words(a), words(b)
    n = max(len(wa), len(wb))
    return 0.0 if n == 0 else edit_distance(wa, wb) / n
