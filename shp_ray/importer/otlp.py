"""``--format otlp``: a loop's LLM spans (OTLP/JSON, a file or a directory of them) rebuilt into rounds.

The spans themselves are read by :mod:`shp_ray.importer.otlp_spans`. Here they become trajectories:

- one trajectory per conversation: ``gen_ai.conversation.id``, else ``session.id``, else the trace id;
- its LLM spans in start-time order; each is the Writer's or the Critic's by the first matching rule
  (``ROLE=FIELD:REGEX``, FIELD one of ``agent`` (gen_ai.agent.name / agent.name), ``span`` (the span's
  name) or ``message`` (the system instructions and system messages of its request)); critic rules are
  tried before writer rules;
- when no span of a conversation matches any rule, its spans alternate Writer, Critic, Writer, ... (a
  self-refine loop, or two agents whose names say nothing); when some match and one does not, the
  conversation cannot be rebuilt (name it with a rule);
- a Writer span opens round t (its reply the draft x_t, its usage the writer's tokens, its duration the
  writer's latency); the Critic span after it gives the critique f_t, the critic's tokens and latency. A
  Critic span with no draft before it, or a second one for the same draft, cannot be rebuilt.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from shp_ray.importer.otlp_spans import LlmSpan, read_spans
from shp_ray.importer.traces import Trace, TraceError, check_file, parse_trace

ROLES = ("writer", "critic")
FIELDS = ("agent", "span", "message")
DEFAULT_RULES = (
    r"critic=agent:(?i)critic|review|judge",
    r"critic=span:(?i)critic|critique|review|judge|feedback",
    r"writer=agent:(?i)writer|author",
    r"writer=span:(?i)writer|draft|refine|generat",
)
SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True)
class Rule:
    role: str
    field: str
    pattern: re.Pattern[str]

    def hits(self, fields: Mapping[str, str]) -> bool:
        """Whether this rule's FIELD, among the call's ``fields``, matches its pattern."""
        value = fields[self.field]
        return bool(value) and self.pattern.search(value) is not None


def parse_rule(spec: str, option: str = "--otlp-role", fields: tuple[str, ...] = FIELDS) -> Rule:
    """``ROLE=FIELD:REGEX`` as a rule; ``option`` and ``fields``: the format's (--inspect-role reads other fields)."""
    role, _, rest = spec.partition("=")
    field, _, regex = rest.partition(":")
    if role not in ROLES or field not in fields or not regex:
        raise TraceError(f"{option} {spec!r}: expected ROLE=FIELD:REGEX, ROLE in {ROLES}, FIELD in {fields}")
    try:
        return Rule(role, field, re.compile(regex))
    except re.error as exc:
        raise TraceError(f"{option} {spec!r}: not a regular expression ({exc})") from None


def first_role(rules: Sequence[Rule], fields: Mapping[str, str]) -> str | None:
    """The role of the first rule matching the call (critic rules tried before writer rules), None: no rule does."""
    ordered = sorted(rules, key=lambda r: ROLES.index(r.role), reverse=True)
    return next((r.role for r in ordered if r.hits(fields)), None)


def _roles(spans: Sequence[LlmSpan], rules: Sequence[Rule]) -> list[str]:
    named = [first_role(rules, {"agent": s.agent, "span": s.name, "message": s.system}) for s in spans]
    if all(n is None for n in named):
        return [ROLES[i % 2] for i in range(len(spans))]
    for span, role in zip(spans, named, strict=True):
        if role is None:
            raise TraceError(
                f"{span.where}: conversation {span.conversation!r} cannot be rebuilt: this span (name "
                f"{span.name!r}, agent {span.agent!r}) matches no --otlp-role rule while others of it do"
            )
    return [role for role in named if role is not None]  # every one: a None raised above


def _trace(spans: Sequence[LlmSpan], rules: Sequence[Rule]) -> Trace:
    rounds: list[dict[str, Any]] = []
    latencies: list[dict[str, float]] = []
    first = spans[0]
    question = ""
    for span, role in zip(spans, _roles(spans, rules), strict=True):
        if span.output is None:
            raise TraceError(
                f"{span.where}: a {role} span with no text (no gen_ai.output.messages, gen_ai.completion or "
                "gen_ai.choice event, or llm.output_messages.0.message.content): the round cannot be rebuilt"
            )
        tokens = {f"{role}_prompt": span.prompt_tokens, f"{role}_completion": span.completion_tokens}
        if role == "writer":
            question = question or span.question
            rounds.append({"draft": span.output, "tokens": tokens})
            latencies.append({"writer": span.latency_s})
            continue
        if not rounds or "feedback" in rounds[-1]:
            what = "no draft before it" if not rounds else "a second critique of the same draft"
            raise TraceError(
                f"{span.where}: conversation {span.conversation!r} cannot be rebuilt: a critic span with {what}"
            )
        rounds[-1]["feedback"] = span.output
        rounds[-1]["tokens"] |= tokens
        latencies[-1]["critic"] = span.latency_s
    meta = {
        "otlp_trace_ids": sorted({s.trace_id for s in spans if s.trace_id}),
        "otlp_models": sorted({s.model for s in spans if s.model}),
        "otlp_agents": sorted({s.agent for s in spans if s.agent}),
    }
    body = {"id": first.conversation, "question": question, "rounds": rounds, **meta}
    trace = parse_trace(body, first.where.split(": ", 1)[0].rstrip(":"), first.line)
    timed = (replace(r, latency=lat) for r, lat in zip(trace.rounds, latencies, strict=True))
    return replace(trace, rounds=tuple(timed))


def rebuild(path: str, spans: Sequence[LlmSpan], skipped: int, rules: Sequence[Rule]) -> list[Trace]:
    """One trajectory per conversation, in the order each first appears."""
    if not spans:
        raise TraceError(f"{path}: no LLM spans (gen_ai.operation.name chat, openinference.span.kind LLM); "
                         f"{skipped} other spans")  # fmt: skip
    seen: dict[tuple[str, str], str] = {}
    by_conversation: dict[str, list[tuple[int, LlmSpan]]] = {}
    for i, span in enumerate(spans):
        key = (span.trace_id, span.span_id)
        if key in seen:
            raise TraceError(f"{span.where}: duplicate span (first at {seen[key]})")
        seen[key] = span.where
        by_conversation.setdefault(span.conversation, []).append((i, span))
    traces = []
    for members in by_conversation.values():
        ordered = [s for _, s in sorted(members, key=lambda m: (m[1].start, m[0]))]
        traces.append(_trace(ordered, rules))
    return check_file(path, traces)


def _files(path: str) -> list[tuple[str, bytes]]:
    root = Path(path)
    try:
        if not root.is_dir():
            return [(path, root.read_bytes())]
        files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise TraceError(f"{path}: a directory with no {' or '.join(SUFFIXES)} file")
        return [(str(p), p.read_bytes()) for p in files]
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_otlp(path: str, rule_specs: Sequence[str] = ()) -> tuple[bytes, list[Trace], int]:
    """(what the generation id hashes, the trajectories, how many non-LLM spans were skipped) of FILE or DIR.

    The hashed bytes cover every file's name and content and the rules given, so the same export read with the
    same rules is the same generation (a second import adds nothing), and other rules make another."""
    rules = [parse_rule(s) for s in (rule_specs or DEFAULT_RULES)]
    digest = hashlib.sha256("\0".join(rule_specs).encode())
    spans: list[LlmSpan] = []
    skipped = 0
    files = _files(path)
    for name, data in files:
        digest.update(f"\0{Path(name).name}\0{len(data)}\0".encode() + data)
        got, n = read_spans(name, data)
        spans += got
        skipped += n
    data = files[0][1] if len(files) == 1 and not rule_specs else digest.digest()
    return data, rebuild(path, spans, skipped, rules), skipped
