"""Trajectories a loop already produced, read and validated: one per line of a JSONL file (or row of Parquet).

    {"id": "q1",                                   required: a string (or integer), unique in the file
     "question": "...",                            optional
     "answers": "Paris" | ["Paris", "paris, FR"],  optional: the gold answer(s) the scorers compare with
     "rounds": [                                   required: rounds 1..T in order, at least one
       {"draft": "...",                            required: the Writer's draft x_t
        "feedback": "...",                         optional: the Critic's critique f_t of this draft ("" = none)
        "tokens": {"writer_prompt": 0, "writer_completion": 0,
                   "critic_prompt": 0, "critic_completion": 0},   optional: the provider's usage (0 if absent)
        "scores": {"pass": 1.0},                   optional: scores the loop already measured (name -> number)
        "embedding": [0.1, ...],                   optional: e_t (computed with the embedder when absent)
        "logprobs": [-0.02, -1.3, ...]}            optional: the draft's token log-probabilities (draft_logprobs)
     ],
     "split": "dev",                               optional: the scenario's split (default "test")
     ...}                                          any other key: kept as the scenario's metadata

Every problem is one :class:`TraceError` naming ``file:line`` and the key; nothing is read past the first.
The ``openai-chat`` shape is read by :mod:`shp_ray.importer.openai_chat` into the same trajectories.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from shp_ray.generation.datasets import split_lines, unencodable
from shp_ray.policy.checks import check_int
from storage.schemas import MAX_TOKENS

TOKEN_KEYS = ("writer_prompt", "writer_completion", "critic_prompt", "critic_completion")
ROUND_KEYS = ("draft", "feedback", "tokens", "scores", "embedding", "logprobs")
TOP_KEYS = ("id", "question", "answers", "rounds", "split")


class TraceError(ValueError):
    """A line of an import file that cannot be a trajectory: ``file:line: what``."""


@dataclass(frozen=True)
class TraceRound:
    draft: str
    feedback: str = ""
    tokens: Mapping[str, int] = field(default_factory=dict)
    scores: Mapping[str, float | None] = field(default_factory=dict)
    embedding: tuple[float, ...] | None = None
    latency: Mapping[str, float] = field(default_factory=dict)  # writer / critic -> seconds (span formats; 0 if absent)
    logprobs: tuple[float, ...] | None = None  # the draft's token log-probabilities, when the log has them


@dataclass(frozen=True)
class Trace:
    id: str
    rounds: tuple[TraceRound, ...]
    question: str = ""
    answers: tuple[str, ...] = ()
    meta: Mapping[str, object] = field(default_factory=dict)
    line: int = 0
    split: str = "test"  # the scenario's split: every summary is per split, never pooled
    task_id: str = ""  # the task this trajectory is one epoch of ("" = its id); --format inspect: the sample's id
    epoch: int = 1


def _where(path: str, line: int) -> str:
    return f"{path}:{line}"


def _count(value: object, where: str, key: str) -> int:
    count = check_int(f"{where}: {key}", value, 0, TraceError)
    if count > MAX_TOKENS:  # no call's usage is this large; a sum of such counts could overflow a reader's INT64
        raise TraceError(f"{where}: {key} must be at most {MAX_TOKENS:,} (one call's tokens), got {count!r}")
    return count


def _number(value: object, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TraceError(f"{where}: {key} must be a finite number, got {value!r}")
    return float(value)


def _text(value: object, where: str, key: str) -> str:
    if not isinstance(value, str):
        raise TraceError(f"{where}: {key} must be a string, got {type(value).__name__}")
    return value


def parse_round(raw: object, where: str, t: int) -> TraceRound:
    key = f"rounds[{t - 1}]"
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where}: {key} must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - set(ROUND_KEYS))
    if unknown:
        raise TraceError(f"{where}: {key} has unknown key(s) {unknown}; a round has {list(ROUND_KEYS)}")
    if "draft" not in raw:
        raise TraceError(f"{where}: {key}.draft is missing")
    draft = _text(raw["draft"], where, f"{key}.draft")
    feedback = _text(raw.get("feedback") or "", where, f"{key}.feedback")
    tokens_raw = raw.get("tokens") or {}
    if not isinstance(tokens_raw, Mapping):
        raise TraceError(f"{where}: {key}.tokens must be an object with keys {list(TOKEN_KEYS)}")
    bad = sorted(set(tokens_raw) - set(TOKEN_KEYS))
    if bad:
        raise TraceError(f"{where}: {key}.tokens has unknown key(s) {bad}; known: {list(TOKEN_KEYS)}")
    tokens = {k: _count(tokens_raw.get(k, 0), where, f"{key}.tokens.{k}") for k in TOKEN_KEYS}
    scores_raw = raw.get("scores") or {}
    if not isinstance(scores_raw, Mapping):
        raise TraceError(f"{where}: {key}.scores must be an object of name -> number")
    scores = {
        _text(n, where, f"{key}.scores key"): None if v is None else _number(v, where, f"{key}.scores.{n}")
        for n, v in scores_raw.items()
    }
    embedding = raw.get("embedding")
    if embedding is not None:
        if not isinstance(embedding, list) or not embedding:
            raise TraceError(f"{where}: {key}.embedding must be a non-empty list of numbers")
        embedding = tuple(_number(x, where, f"{key}.embedding[{i}]") for i, x in enumerate(embedding))
    logprobs = raw.get("logprobs")
    if logprobs is not None:
        if not isinstance(logprobs, list) or not logprobs:
            raise TraceError(f"{where}: {key}.logprobs must be a non-empty list of numbers <= 0")
        logprobs = tuple(_number(x, where, f"{key}.logprobs[{i}]") for i, x in enumerate(logprobs))
        if max(logprobs) > 0:
            raise TraceError(f"{where}: {key}.logprobs must be log-probabilities (<= 0), got {max(logprobs)!r}")
    return TraceRound(draft, feedback, tokens, scores, embedding, logprobs=logprobs)


def parse_trace(raw: object, where: str, line: int) -> Trace:
    """One trajectory from its decoded JSON object (``where``: ``file:line`` for the messages)."""
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where}: a trajectory must be a JSON object, got {type(raw).__name__}")
    if "id" not in raw:
        raise TraceError(f"{where}: id is missing")
    tid = raw["id"]
    if isinstance(tid, bool) or not isinstance(tid, (str, int)) or str(tid) == "":
        raise TraceError(f"{where}: id must be a non-empty string or an integer, got {tid!r}")
    question = _text(raw.get("question") or "", where, "question")
    answers = raw.get("answers")
    if answers is None:
        answers = ()
    elif isinstance(answers, str):
        answers = (answers,)
    elif isinstance(answers, list) and all(isinstance(a, str) for a in answers):
        answers = tuple(answers)
    else:
        raise TraceError(f"{where}: answers must be a string or a list of strings, got {answers!r}")
    rounds = raw.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        raise TraceError(f"{where}: rounds must be a non-empty list, got {type(rounds).__name__}")
    parsed = tuple(parse_round(r, where, t) for t, r in enumerate(rounds, start=1))
    dims = {len(r.embedding) for r in parsed if r.embedding is not None}
    if len(dims) > 1:
        raise TraceError(f"{where}: rounds' embeddings have different sizes {sorted(dims)}")
    split = raw.get("split", "test")
    if not isinstance(split, str) or not split.strip():
        raise TraceError(f"{where}: split must be a non-empty string (dev, test, ...), got {split!r}")
    meta = {k: v for k, v in raw.items() if k not in TOP_KEYS}
    return Trace(str(tid), parsed, question, answers, meta, line, split.strip())


def check_file(path: str, traces: list[Trace]) -> list[Trace]:
    """Refuse duplicate ids and mixed embedding sizes across the file (naming the lines); at least one trace."""
    if not traces:
        raise TraceError(f"{path}: no trajectories in the file")
    first: dict[str, int] = {}
    dim_at: dict[int, int] = {}
    for trace in traces:
        if trace.id in first:
            raise TraceError(f"{_where(path, trace.line)}: duplicate id {trace.id!r} (first on line {first[trace.id]})")
        first[trace.id] = trace.line
        for r in trace.rounds:
            if r.embedding is not None:
                dim_at.setdefault(len(r.embedding), trace.line)
    if len(dim_at) > 1:
        (d1, l1), (d2, l2) = sorted(dim_at.items(), key=lambda kv: kv[1])[:2]
        raise TraceError(f"{_where(path, l2)}: embedding size {d2} differs from size {d1} on line {l1}")
    return traces


def json_lines(path: str, data: bytes) -> Iterator[tuple[int, object]]:
    """(line number, decoded object) of each non-blank line; TraceError at the first that is not JSON."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for n, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{_where(path, n)}: not JSON ({exc.msg} at column {exc.colno})") from None
        bad = unencodable(obj)
        if bad:
            raise TraceError(f"{_where(path, n)}: text UTF-8 cannot encode (a lone surrogate) in {bad}")
        yield n, obj


def read_jsonl(path: str, data: bytes) -> list[Trace]:
    return check_file(path, [parse_trace(obj, _where(path, n), n) for n, obj in json_lines(path, data)])


def read_parquet(path: str, data: bytes) -> list[Trace]:
    """One trajectory per row (the JSONL keys as columns; ``rounds`` a list of structs); ``file:row`` errors."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except Exception as exc:  # ArrowInvalid and friends: not a Parquet file
        raise TraceError(f"{path}: not a Parquet file ({exc})") from None
    traces = []
    for n, row in enumerate(table.to_pylist(), start=1):
        row = {k: v for k, v in row.items() if v is not None}
        if isinstance(row.get("rounds"), list):  # a struct column fills absent fields with None: read as absent
            row["rounds"] = [{k: v for k, v in r.items() if v is not None} if isinstance(r, dict) else r
                             for r in row["rounds"]]  # fmt: skip
        traces.append(parse_trace(row, f"{path}:row {n}", n))
    return check_file(path, traces)
