"""Imported trajectories -> one generation of kind ``imported`` in the store, whole or not at all.

The generation's id is the content hash of the file: sha256 over a fixed tag, the format, the embedder when it
computes embeddings (none given for some round) and the file's bytes. So importing the same file again finds
its generation and adds nothing; an edited file is a new generation. Its rows are the ones a generated run
writes (scenarios, rounds, signals, scores, draft answers, a manifest and the generations row), so every policy,
ablation cell and stopping family replays it, and ``shp-query`` and the report read it.

Atomic: everything is read, validated, embedded and scored in memory first; then the parts are written, the
generations row last (what "already imported" looks for); if a write fails, every part written is deleted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from shp_ray.generation.answer_config import AnswerSpec, answer_rows
from shp_ray.generation.answer_config import build as build_extractor
from shp_ray.generation.config import DEFAULT_EMBEDDER
from shp_ray.generation.embedder import Embedder, embedder_name
from shp_ray.generation.judge import draft_hash
from shp_ray.generation.records import logprob_rows, signal_rows
from shp_ray.generation.score_config import ScoreSpec, build
from shp_ray.importer.inspect_rounds import read_inspect, read_inspect_with
from shp_ray.importer.openai_chat import read_openai_chat
from shp_ray.importer.otlp import read_otlp
from shp_ray.importer.traces import Trace, TraceError, read_jsonl, read_parquet
from shp_ray.policy.scorers import Scorer, Task, score_rows
from storage.answers_schema import DRAFT_ANSWERS
from storage.lock import generation_lock
from storage.logprobs_schema import DRAFT_LOGPROBS
from storage.manifest import manifest_row, new_run_id
from storage.parts import Store
from storage.resume import column_values
from storage.schemas import GENERATIONS, MANIFESTS, SCENARIOS, SCORES, SIGNALS, rounds_schema
from storage.writer import rows_to_table

IMPORT_VERSION = "shp-import-v1"  # part of every imported gen_id: how a file becomes rows
KIND = "imported"
GIVEN = "given"  # the scorer identity of scores the file carried
READERS: dict[str, Callable[[str, bytes], list[Trace]]] = {
    "jsonl": read_jsonl,
    "parquet": read_parquet,
    "openai-chat": read_openai_chat,
    "inspect": read_inspect,  # an inspect_ai log: .eval (zip) or .json
}
FORMATS = (*READERS, "otlp")  # otlp: a file or a directory of span exports, rebuilt into rounds by rules
# the formats whose Writer / Critic are decided by rules (--otlp-role, --inspect-role)
ROLE_FORMATS = ("otlp", "inspect")


@dataclass(frozen=True)
class ImportRequest:
    path: str
    store: Store  # made once from --store by the command (shp_ray.importer.cli)
    fmt: str = "jsonl"
    embedder: str = DEFAULT_EMBEDDER  # for rounds without an embedding
    scores: tuple[ScoreSpec, ...] = ()  # scorers run on every imported draft (besides the file's own scores)
    command: str = ""
    roles: tuple[str, ...] = ()  # --format otlp / inspect: the Writer/Critic rules (ROLE=FIELD:REGEX); () = defaults


@dataclass(frozen=True)
class ImportResult:
    gen_id: str
    added: bool  # False: this file was imported before (nothing written)
    trajectories: int
    rounds: int
    embedded: int = 0  # rounds whose embedding was computed here
    failed: dict[str, tuple[int, int]] = field(default_factory=dict)  # score -> (failed rounds, scored rounds)
    skipped: int | None = None  # --format otlp: the spans that were not LLM calls (None: not a span format)


@functools.lru_cache(maxsize=2)
def _embedder(model: str) -> Embedder:
    """One embedder per model in this process (loading MiniLM costs seconds): imports in a row share it."""
    return Embedder(model)


def read_traces(path: str, fmt: str, roles: tuple[str, ...] = ()) -> tuple[bytes, list[Trace], int | None]:
    """(the bytes the generation id hashes, the trajectories, the skipped spans of a span format)."""
    if fmt == "otlp":
        return read_otlp(path, roles)
    if fmt not in READERS:
        raise TraceError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if roles and fmt not in ROLE_FORMATS:
        raise TraceError(f"--format {fmt}: its trajectories name their Writer and Critic; rules apply to "
                         f"{' and '.join(ROLE_FORMATS)} only")  # fmt: skip
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if fmt == "inspect":
        return (*read_inspect_with(path, data, roles), None)
    return data, READERS[fmt](path, data), None


def generation_id(fmt: str, data: bytes, embedder: str | None) -> str:
    h = hashlib.sha256(f"{IMPORT_VERSION}\0{fmt}\0{embedder or ''}\0".encode())
    h.update(data)
    return h.hexdigest()


def _store_dim(store: Store) -> int | None:
    import pyarrow.parquet as pq

    for part in store.parts("rounds"):
        return int(pq.read_schema(part, filesystem=store.fs).field("embedding").type.list_size)
    return None


def _check_scenarios(store: Store, path: str, traces: Sequence[Trace]) -> set[str]:
    """Ids already stored as scenarios: the same task may be imported again (skipped), another may not."""
    stored = {}
    for part in store.parts("scenarios"):
        t = store.read_part("scenarios", part, columns=["scenario_id", "question", "ground_truth"])
        stored.update({r["scenario_id"]: (r["question"], r["ground_truth"]) for r in t.to_pylist()})
    for trace in traces:
        have = stored.get(trace.id)
        mine = (trace.question, trace.answers[0] if trace.answers else None)
        if have is not None and tuple(have) != mine:
            raise TraceError(
                f"{path}:{trace.line}: id {trace.id!r} is already a scenario of {store.uri} with another question or "
                "answer; rename the id or import into another store"
            )
    return set(stored)


def _embeddings(traces: Sequence[Trace], embedder: Embedder | None) -> list[np.ndarray]:
    """Every round's embedding in file order: as given, or computed (one batch) where absent."""
    flat = [r for t in traces for r in t.rounds]
    missing = [i for i, r in enumerate(flat) if r.embedding is None]
    computed = embedder.encode([flat[i].draft for i in missing]) if missing and embedder else []
    out = [np.asarray(r.embedding, dtype=np.float32) if r.embedding is not None else None for r in flat]
    for i, vec in zip(missing, computed, strict=True):
        out[i] = vec
    return out  # type: ignore[return-value]


def _rows(
    scorers: Sequence[Scorer], gen_id: str, traces: Sequence[Trace], vectors: list[np.ndarray]
) -> dict[str, list]:
    scenarios, rounds, given = [], [], []
    it = iter(vectors)
    for trace in traces:
        scenarios.append(
            {
                "scenario_id": trace.id,
                "dataset": KIND,
                "split": trace.split,
                "question": trace.question,
                "contexts": [],
                "ground_truth": trace.answers[0] if trace.answers else None,
                "references": list(trace.answers),
                "meta_json": json.dumps(dict(trace.meta), sort_keys=True, default=str),
                "task_id": trace.task_id or trace.id,
                "epoch": trace.epoch,
            }
        )
        for t, r in enumerate(trace.rounds, start=1):
            tok = r.tokens
            rounds.append(
                {
                    "gen_id": gen_id, "scenario_id": trace.id, "round": t, "draft": r.draft, "feedback": r.feedback,
                    "draft_hash": draft_hash(r.draft),
                    "writer_prompt_tokens": tok.get("writer_prompt", 0),
                    "writer_completion_tokens": tok.get("writer_completion", 0),
                    "critic_prompt_tokens": tok.get("critic_prompt", 0),
                    "critic_completion_tokens": tok.get("critic_completion", 0),
                    "writer_latency_s": r.latency.get("writer", 0.0), "critic_latency_s": r.latency.get("critic", 0.0),
                    "embedding": next(it),
                    "writer_mode": "live", "critic_mode": "live",
                }
            )  # fmt: skip
            given += [
                {"gen_id": gen_id, "scenario_id": trace.id, "round": t, "score": name, "value": value,
                 "error": None, "scorer": GIVEN}
                for name, value in r.scores.items()
            ]  # fmt: skip
    tasks = {t.id: Task(t.id, t.question, t.answers, t.meta) for t in traces}
    items = [(tasks[r["scenario_id"]], r["round"], r["draft"]) for r in rounds]
    scored = score_rows(scorers, gen_id, items)
    gold = {t.id: (t.answers[0] if t.answers else None) for t in traces}
    answers = answer_rows(build_extractor(AnswerSpec()), gen_id, items)  # each draft's answer: the task's own reading
    drafted = [(t.id, [(i, r.logprobs) for i, r in enumerate(t.rounds, start=1)]) for t in traces]
    sure = [row for sid, lps in drafted for row in logprob_rows(gen_id, sid, lps)]  # a log that holds them
    return {"scenarios": scenarios, "rounds": rounds, "scores": given + scored, "gold": gold, "answers": answers,
            "logprobs": sure}  # fmt: skip


def _write_all(store: Store, tables: list[tuple[str, pa.Table, pa.Schema]]) -> None:
    written: list[str] = []
    try:
        for name, table, schema in tables:
            path = store.write(name, table, schema)
            if path:
                written.append(path)
    except BaseException:
        for path in written:  # nothing of a failed import stays behind
            with contextlib.suppress(OSError):
                store.fs.delete_file(path)
        raise


def import_traces(req: ImportRequest) -> ImportResult:
    """Validate, embed, score and store the file's trajectories as one generation (see the module docstring)."""
    data, traces, skipped = read_traces(req.path, req.fmt, req.roles)
    scorers = [build(s) for s in req.scores]  # a bad scorer fails before any work
    n_rounds = sum(len(t.rounds) for t in traces)
    computes = any(r.embedding is None for t in traces for r in t.rounds)
    gen_id = generation_id(req.fmt, data, req.embedder if computes else None)
    store = req.store
    if gen_id in column_values(store, "generations", "gen_id"):
        return ImportResult(gen_id, False, len(traces), n_rounds, skipped=skipped)
    given = next((len(r.embedding) for t in traces for r in t.rounds if r.embedding is not None), None)
    embedder = _embedder(req.embedder) if computes else None
    dim = embedder.dim if embedder else given
    line = next(t.line for t in traces if any(r.embedding is not None for r in t.rounds)) if given else 0
    if given is not None and given != dim:
        raise TraceError(f"{req.path}:{line}: embedding size {given} differs from the embedder's {dim}")
    stored_dim = _store_dim(store)
    if stored_dim is not None and dim != stored_dim:
        where = f"{req.path}:{line}" if given else req.path
        raise TraceError(f"{where}: embedding size {dim} differs from the store's {stored_dim} ({store.uri})")
    with generation_lock(store.cache_dir, gen_id):
        if gen_id in column_values(store, "generations", "gen_id"):  # imported meanwhile by another process
            return ImportResult(gen_id, False, len(traces), n_rounds, skipped=skipped)
        known = _check_scenarios(store, req.path, traces)
        rows = _rows(scorers, gen_id, traces, _embeddings(traces, embedder))
        name = (embedder_name(req.embedder) if embedder else GIVEN) + (" + given" if embedder and given else "")
        signals = signal_rows(rows["rounds"], rows["gold"], {gen_id: name})
        config = {"kind": KIND, "source": str(Path(req.path).resolve()), "format": req.fmt,
                  "sha256": hashlib.sha256(data).hexdigest(), "embedder": name, "trajectories": len(traces),
                  "scorers": [s.identity for s in scorers], "import_version": IMPORT_VERSION}  # fmt: skip
        generation = {
            "gen_id": gen_id, "model": KIND, "prompt_version": KIND,
            "max_rounds": max(len(t.rounds) for t in traces), "temperature": None, "seed": None,
            "embedder": name, "embedding_dim": dim, "config_json": json.dumps(config, sort_keys=True),
            "created_at": datetime.now(UTC),
        }  # fmt: skip
        manifest = manifest_row(new_run_id(), {"import": config}, {}, req.command)
        rschema = rounds_schema(dim)  # type: ignore[arg-type]
        fresh = [s for s in rows["scenarios"] if s["scenario_id"] not in known]
        _write_all(
            store,
            [
                ("scenarios", pa.Table.from_pylist(fresh, schema=SCENARIOS), SCENARIOS),
                ("rounds", rows_to_table("rounds", rows["rounds"], rschema), rschema),
                ("signals", pa.Table.from_pylist(signals, schema=SIGNALS), SIGNALS),
                ("scores", pa.Table.from_pylist(rows["scores"], schema=SCORES), SCORES),
                ("draft_answers", pa.Table.from_pylist(rows["answers"], schema=DRAFT_ANSWERS), DRAFT_ANSWERS),
                ("draft_logprobs", pa.Table.from_pylist(rows["logprobs"], schema=DRAFT_LOGPROBS), DRAFT_LOGPROBS),
                ("manifests", pa.Table.from_pylist([manifest], schema=MANIFESTS), MANIFESTS),
                ("generations", pa.Table.from_pylist([generation], schema=GENERATIONS), GENERATIONS),
            ],
        )
    failed: dict[str, tuple[int, int]] = {}
    for r in rows["scores"]:
        bad, total = failed.get(r["score"], (0, 0))
        failed[r["score"]] = (bad + (r["error"] is not None), total + 1)
    embedded = sum(r.embedding is None for t in traces for r in t.rounds)
    return ImportResult(gen_id, True, len(traces), n_rounds, embedded, failed, skipped)
