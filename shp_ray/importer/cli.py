"""``shp-import``: trajectories your loop already produced, into a store, replayed like generated ones."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from shp_ray.generation.answer_config import AnswerConfigError
from shp_ray.generation.answer_config import parse as parse_answer
from shp_ray.generation.config import DEFAULT_EMBEDDER
from shp_ray.generation.score_config import ScoreConfigError, parse
from shp_ray.importer.ingest import FORMATS, ROLE_FORMATS, ImportRequest, ImportResult, import_traces
from shp_ray.importer.rescore import rescore, rescore_answers
from shp_ray.importer.traces import TraceError
from storage.parts import Store, StoreError, StoreUnusable
from storage.resume import full_gen_id

SCHEMA = """\
one trajectory per line (--format jsonl; --format parquet: the same keys as columns, one row each):
  {"id": "q1",                                  required, unique in the file
   "question": "...",                           optional
   "answers": "Paris" | ["Paris", ...],         optional: the gold answer(s) scorers compare with
   "rounds": [{"draft": "...",                  required, rounds 1..T in order
               "feedback": "...",               optional: the critique of this draft ("" = none)
               "tokens": {"writer_prompt": 0, "writer_completion": 0,
                          "critic_prompt": 0, "critic_completion": 0},   optional (0 if absent)
               "scores": {"name": 1.0},         optional: scores the loop already measured
               "embedding": [0.1, ...]}]}       optional: computed with --embedder when absent
  any other top-level key is kept as the scenario's metadata.
--format openai-chat: {"id", "question"?, "answers"?, "calls": [{"agent": "writer"|"critic",
  "request": {"messages": [...]}, "response": <chat.completion with choices and usage>}, ...]}
  (writer and critic calls alternate, writer first; round t = the t-th writer call and the critic after it).
--format otlp FILE|DIR: OpenTelemetry span exports as OTLP/JSON (the collector's file exporter), GenAI or
  OpenInference attributes; one trajectory per conversation (gen_ai.conversation.id, else session.id, else
  the trace id), its LLM spans in start order; Writer or Critic by --otlp-role ROLE=FIELD:REGEX (FIELD agent,
  span or message; default: names saying critic/review/judge vs writer/author/draft, else alternating).
--format inspect LOG.eval|LOG.json: an inspect_ai log; one trajectory per sample x epoch (id, then id#e2 ...);
  a model call whose reply is a turn of the sample's conversation is the Writer's (a draft), one whose reply is
  not (or of a model role named critic/review/judge) the Critic's; else the user turns after a draft are its
  critique; the sample's scores are the last round's, intermediate scores their round's. --inspect-role
  ROLE=FIELD:REGEX (FIELD role: the call's model role, model: its model, message: its system messages) names a
  call the Writer's or the Critic's first; a call no rule matches is decided by its reply as above.

--score (repeatable): hotpot (em, f1), exact[:NAME], contains[:NAME], regex:PATTERN (with a named group
(?P<answer>...)), python:package.module:function or python:path/to/file.py:function (your
(task, draft) -> dict[str, float]).
--rescore also stores each draft's answer (draft_answers, what answer_stable, answer_runlength, adaptive_consistency
and sprt read) by --answer: auto (the task's own: a code task's AST hash, else the lenient QA answer), qa, code,
python:package.module:function or python:path/to/file.py:function (your (task, draft) -> str | None).

The generation's id is the file's content hash: importing the same file again adds nothing.
A file that does not validate fails with file:line and writes nothing."""


def _report(res: ImportResult, path: str, shown: str) -> None:
    spans = "" if res.skipped is None else f"; {res.skipped} spans that are not LLM calls skipped"
    if not res.added:
        print(f"{path} is already in {shown} as generation {res.gen_id}: nothing added{spans}")
        return
    print(
        f"imported {res.trajectories} trajectories ({res.rounds} rounds) from {path} into {shown} "
        f"as generation {res.gen_id} (kind imported; {res.embedded} embeddings computed{spans})"
    )
    _report_scores(res.failed)


def _report_scores(failed: dict[str, tuple[int, int]]) -> None:
    for name, (bad, total) in sorted(failed.items()):
        share = f" ({bad / total:.1%})" if bad else ""
        print(f"score {name}: {total} rounds scored, {bad} failed{share}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="shp-import",
        description="Import a loop's existing trajectories into a store as one generation of kind `imported`, "
        "which every policy, ablation cell and stopping family then replays.",
        epilog=SCHEMA,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("path", nargs="?", help="the file of trajectories (--format otlp: or a directory of exports)")
    ap.add_argument("--store", required=True, help="store root (created if absent)")
    ap.add_argument("--format", choices=FORMATS, default="jsonl", help="the file's shape (default: jsonl)")
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="embeds drafts given without an embedding")
    ap.add_argument("--score", action="append", default=[], metavar="SPEC", help="a scorer to run on every draft")
    ap.add_argument(
        "--rescore", metavar="GEN_ID",
        help="instead: run --score on a stored generation's drafts (its id or a prefix) and store their answers",
    )  # fmt: skip
    ap.add_argument("--answer", default="auto", metavar="SPEC", help="--rescore: what reads each draft's answer")
    ap.add_argument(
        "--otlp-role", action="append", default=[], metavar="ROLE=FIELD:REGEX",
        help="--format otlp: a span is the writer's or critic's when FIELD (agent, span, message) matches REGEX",
    )  # fmt: skip
    ap.add_argument(
        "--inspect-role", action="append", default=[], metavar="ROLE=FIELD:REGEX",
        help="--format inspect: a model call is the writer's or critic's when FIELD (role, model, message) "
        "matches REGEX",
    )  # fmt: skip
    args = ap.parse_args(argv)
    for fmt in ROLE_FORMATS:
        if getattr(args, f"{fmt}_role") and args.format != fmt:
            ap.error(f"--{fmt}-role applies to --format {fmt} only")
    if (args.path is None) == (args.rescore is None):
        ap.error("give a PATH to import, or --rescore GEN_ID (not both)")
    try:
        store = Store(args.store)  # the one conversion: every step below takes the Store
        specs = tuple(parse(s) for s in args.score)
        if args.rescore is not None:
            answers = rescore_answers(store, args.rescore, parse_answer(args.answer))
            stated = sum(r["answer"] is not None for r in answers)
            gen = full_gen_id(store, args.rescore)  # the whole id a prefix names
            print(f"answers of generation {gen}: {len(answers)} new rows, {stated} drafts state one (no model call)")
            rows = rescore(store, args.rescore, specs) if specs else []
            failed: dict[str, tuple[int, int]] = {}
            for r in rows:
                bad, total = failed.get(r["score"], (0, 0))
                failed[r["score"]] = (bad + (r["error"] is not None), total + 1)
            if specs:
                print(f"scored generation {gen}: {len(rows)} new score rows (no model call)")
            _report_scores(failed)
            return 0
        command = "shp-import " + " ".join(sys.argv[1:] if argv is None else argv)
        request = ImportRequest(
            args.path,
            store,
            args.format,
            args.embedder,
            specs,
            command,
            tuple(args.otlp_role or args.inspect_role),
        )
        _report(import_traces(request), args.path, args.store)
        return 0
    except (TraceError, ScoreConfigError, AnswerConfigError, StoreError, StoreUnusable, OSError, TimeoutError) as exc:
        print(f"shp-import: {exc}", file=sys.stderr)
        return 2


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
