"""OTLP/JSON span exports -> the LLM calls they record, in either attribute vocabulary, validated to the line.

The shape is the OpenTelemetry collector's file exporter's: one ``ExportTraceServiceRequest`` per line (or one
JSON document for the whole file), ``resourceSpans[].scopeSpans[].spans[]``, ids as hex strings, attributes
as ``[{"key": k, "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue" |
"kvlistValue": ...}}]`` (``intValue`` and the times may be JSON strings: int64 in proto3 JSON).

An LLM call is a span with ``gen_ai.operation.name`` chat / text_completion / generate_content (the
OpenTelemetry GenAI semantic conventions) or ``openinference.span.kind`` = LLM (OpenInference); every other
span is counted and skipped. Messages are read from the span's attributes and, where the conventions allow them
there, from its events: ``gen_ai.client.inference.operation.details`` (``gen_ai.input.messages`` /
``gen_ai.output.messages``), the older ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events, and the
per-message events of the conventions up to v1.36 (``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message``, ``gen_ai.tool.message`` for the request, ``gen_ai.choice`` for the reply). Those are
log records by the conventions; on a span they are span events of the same name, whose body is the
``gen_ai.event.content`` attribute (a JSON object, as Azure's and Semantic Kernel's instrumentations write it) or
else the event's own attributes (``content``, ``role``, ``message``, ``index``). Each side is read from the
attributes when they hold it, else from the events.

A span's duration (end - start) is its call's latency: the round's ``writer_latency_s`` / ``critic_latency_s``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from shp_ray.importer.traces import TraceError, json_lines
from shp_ray.policy.checks import check_int
from storage.schemas import MAX_TOKENS

LLM_OPERATIONS = ("chat", "text_completion", "generate_content")
HEX_ID = {"traceId": re.compile(r"[0-9a-fA-F]{32}"), "spanId": re.compile(r"[0-9a-fA-F]{16}")}
SCALARS = ("stringValue", "boolValue", "intValue", "doubleValue", "bytesValue")
# the per-message events (GenAI conventions <= v1.36) -> the role of the message each carries; choice: a reply
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "choice",
}
EVENT_BODY = "gen_ai.event.content"


@dataclass(frozen=True)
class LlmSpan:
    where: str  # file:line: resourceSpans[i].scopeSpans[j].spans[k] (span <id>)
    line: int
    span_id: str
    trace_id: str
    name: str
    start: int  # startTimeUnixNano
    latency_s: float  # endTimeUnixNano - startTimeUnixNano, in seconds (0: the span records no end)
    conversation: str  # gen_ai.conversation.id, else session.id, else the trace id
    agent: str
    model: str
    output: str | None  # the reply's text (None: the span records none)
    system: str  # the system instructions and system messages, for the rules' message patterns
    question: str  # the last user message of the request
    prompt_tokens: int
    completion_tokens: int


def _value(raw: object, where: str) -> object:
    """One AnyValue as Python: str, bool, int, float, list or dict (None: empty)."""
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where} must be an AnyValue object, got {type(raw).__name__}")
    if not raw:
        return None
    if len(raw) != 1:
        raise TraceError(f"{where} must hold exactly one of stringValue, intValue, ..., got keys {sorted(raw)}")
    ((kind, v),) = raw.items()
    if kind == "intValue":
        if isinstance(v, str) and re.fullmatch(r"-?\d+", v):
            return int(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise TraceError(f"{where}.intValue must be an integer (or its decimal string), got {v!r}")
    if kind == "doubleValue" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if kind == "stringValue" and isinstance(v, str) or kind == "boolValue" and isinstance(v, bool):
        return v
    if kind == "bytesValue" and isinstance(v, str):
        return v
    if kind == "arrayValue" and isinstance(v, Mapping):
        return [_value(x, f"{where}.arrayValue.values[{i}]") for i, x in enumerate(_list(v, "values", where))]
    if kind == "kvlistValue" and isinstance(v, Mapping):
        return attributes(v.get("values"), f"{where}.kvlistValue.values")
    raise TraceError(f"{where}.{kind}: not a valid {kind}, got {v!r}")


def _list(obj: Mapping, key: str, where: str) -> list:
    got = obj.get(key, [])
    if got is None:
        return []
    if not isinstance(got, list):
        raise TraceError(f"{where}.{key} must be a list, got {type(got).__name__}")
    return got


def attributes(raw: object, where: str) -> dict[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise TraceError(f"{where} must be a list of {{key, value}}, got {type(raw).__name__}")
    out: dict[str, object] = {}
    for i, kv in enumerate(raw):
        if not isinstance(kv, Mapping) or not isinstance(kv.get("key"), str):
            raise TraceError(f"{where}[{i}] must be an object with a string key")
        out[kv["key"]] = _value(kv.get("value", {}), f"{where}[{i}].value")
    return out


def _messages(value: object, where: str, key: str) -> list[tuple[str, str]]:
    """(role, text) of a GenAI messages attribute: a JSON string (or structured value) of role + parts/content."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: {key} is not JSON ({exc.msg} at column {exc.colno})") from None
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise TraceError(f"{where}: {key} must be a list of messages (objects with a role)")
    out = []
    for m in value:
        content = m.get("content")
        if content is None and isinstance(m.get("parts"), list):
            content = [p.get("content") for p in m["parts"] if isinstance(p, Mapping) and p.get("type") == "text"]
        if isinstance(content, list):
            content = "".join(c for c in content if isinstance(c, str))
        out.append((str(m.get("role", "")), content if isinstance(content, str) else ""))
    return out


def _content(value: object) -> str:
    """A message event's content as text: a string, a list of parts (strings or text parts), or an object holding
    it (``{"text": {"value": ...}}`` as Azure's agents write it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_content(v) for v in value if not isinstance(v, Mapping) or v.get("type") in (None, "text"))
    if isinstance(value, Mapping):
        return next((_content(value[k]) for k in ("text", "content", "value") if k in value), "")
    return ""


def _json(text: str, said: str) -> object:
    """``text`` parsed, or a TraceError: ``said`` and where the JSON broke."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{said} ({exc.msg} at column {exc.colno})") from None


def _body(attrs: Mapping[str, object], where: str) -> Mapping[str, object]:
    """A message event's body: its gen_ai.event.content (a JSON object), else its own attributes."""
    if EVENT_BODY not in attrs:
        return attrs
    body = attrs[EVENT_BODY]
    if isinstance(body, str):
        body = _json(body, f"{where}.{EVENT_BODY} is not JSON")
    if not isinstance(body, Mapping):
        raise TraceError(f"{where}.{EVENT_BODY} must be a JSON object (the event's body), got {type(body).__name__}")
    return body


def _message_events(events: list[tuple[str, dict[str, object]]], where: str) -> tuple[list, list]:
    """(input messages, output messages) of the per-message events; the choices in their index's order."""
    inputs, choices = [], []
    for i, (name, attrs) in enumerate(events):
        role = MESSAGE_EVENTS.get(name)
        if role is None:
            continue
        at = f"{where}: events[{i}] ({name})"
        body = _body(attrs, f"{at}.attributes")
        if role != "choice":
            inputs.append((str(body.get("role") or role), _content(body.get("content"))))
            continue
        message = body.get("message") or {}
        if isinstance(message, str):  # a body flattened into attributes: the message as its JSON
            message = _json(message, f"{at}: a choice's message is not JSON")
        if not isinstance(message, Mapping):
            raise TraceError(f"{at}: a choice's message must be an object, got {type(message).__name__}")
        index = body.get("index", 0)
        index = index if isinstance(index, int) and not isinstance(index, bool) else 0
        choices.append((index, i, (str(message.get("role") or "assistant"), _content(message.get("content")))))
    return inputs, [m for _, _, m in sorted(choices)]


def _inference(
    attrs: Mapping[str, object], events: list[tuple[str, dict[str, object]]], where: str
) -> tuple[list, list]:
    """(input messages, output messages) in the GenAI vocabulary: each side from the attributes, else from the
    events holding the messages attributes, else from the per-message events."""
    found: dict[str, list] = {}
    sources = [attrs, *(a for _, a in events)]
    for key, old in (("gen_ai.input.messages", "gen_ai.prompt"), ("gen_ai.output.messages", "gen_ai.completion")):
        for src in sources:
            for k in (key, old):
                if k in src and key not in found:
                    found[key] = _messages(src[k], where, k)
    inputs, outputs = found.get("gen_ai.input.messages"), found.get("gen_ai.output.messages")
    if inputs is None or outputs is None:
        by_event = _message_events(events, where)
        inputs, outputs = inputs or by_event[0], outputs or by_event[1]
    return inputs, outputs


def _openinference(attrs: Mapping[str, object], side: str) -> list[tuple[str, str]]:
    """(role, text) of ``llm.<side>_messages.N.message.role|content`` in N's order."""
    pattern = re.compile(rf"llm\.{side}_messages\.(\d+)\.message\.(role|content)")
    rows: dict[int, dict[str, str]] = {}
    for key, value in attrs.items():
        m = pattern.fullmatch(key)
        if m and isinstance(value, str):
            rows.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [(r.get("role", ""), r.get("content", "")) for _, r in sorted(rows.items())]


def _count(attrs: Mapping[str, object], keys: tuple[str, ...], where: str) -> int:
    for key in keys:
        if key in attrs:
            count = check_int(f"{where}: {key}", attrs[key], 0, TraceError)
            if count > MAX_TOKENS:  # as traces._count: no call's usage is this large
                raise TraceError(f"{where}: {key} must be at most {MAX_TOKENS:,} (one call's tokens), got {count!r}")
            return count
    return 0


def _text(attrs: Mapping[str, object], keys: tuple[str, ...]) -> str:
    return next((str(attrs[k]) for k in keys if isinstance(attrs.get(k), str) and attrs[k]), "")


def _span(raw: object, where: str, line: int, resource: Mapping[str, object]) -> LlmSpan | None:
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where} must be a span object, got {type(raw).__name__}")
    sid = raw.get("spanId")
    if not isinstance(sid, str) or not HEX_ID["spanId"].fullmatch(sid):
        hint = " (OTLP/JSON writes ids as hex, not protobuf JSON's base64)" if isinstance(sid, str) else ""
        raise TraceError(f"{where}: spanId must be 16 hex digits, got {sid!r}{hint}")
    where = f"{where} (span {sid.lower()})"
    attrs = {**resource, **attributes(raw.get("attributes"), f"{where}: attributes")}
    kind = attrs.get("openinference.span.kind")
    if attrs.get("gen_ai.operation.name") not in LLM_OPERATIONS and str(kind).upper() != "LLM":
        return None
    tid = raw.get("traceId")
    if tid is not None and (not isinstance(tid, str) or not HEX_ID["traceId"].fullmatch(tid)):
        raise TraceError(f"{where}: traceId must be 32 hex digits, got {tid!r}")
    start = raw.get("startTimeUnixNano")
    if isinstance(start, str) and start.isdigit():
        start = int(start)
    if not isinstance(start, int) or isinstance(start, bool) or start < 0:
        raise TraceError(f"{where}: startTimeUnixNano must be an integer >= 0, got {start!r}")
    end = raw.get("endTimeUnixNano")
    if isinstance(end, str) and end.isdigit():
        end = int(end)
    if end is not None and (not isinstance(end, int) or isinstance(end, bool) or end < start):
        raise TraceError(f"{where}: endTimeUnixNano must be an integer >= startTimeUnixNano ({start}), got {end!r}")
    events = []
    for i, event in enumerate(_list(raw, "events", where)):
        if not isinstance(event, Mapping):
            raise TraceError(f"{where}: events[{i}] must be an object, got {type(event).__name__}")
        events.append(
            (str(event.get("name") or ""), attributes(event.get("attributes"), f"{where}: events[{i}].attributes"))
        )
    gin, gout = _inference(attrs, events, where)
    inputs, outputs = (gin, gout) if gin or gout else (_openinference(attrs, "input"), _openinference(attrs, "output"))
    replies = [text for role, text in outputs if role in ("assistant", "model", "")]
    conversation = _text(attrs, ("gen_ai.conversation.id", "session.id")) or (tid or "").lower()
    if not conversation:
        raise TraceError(f"{where}: no gen_ai.conversation.id, session.id or traceId: the span belongs to no loop")
    system = [str(attrs.get("gen_ai.system_instructions") or "")] + [t for r, t in inputs if r == "system"]
    users = [t for r, t in inputs if r == "user"]
    return LlmSpan(
        where, line, sid.lower(), (tid or "").lower(), str(raw.get("name") or ""), start,
        (end - start) / 1e9 if end else 0.0, conversation,
        _text(attrs, ("gen_ai.agent.name", "agent.name")), _text(attrs, ("gen_ai.request.model", "llm.model_name",
        "gen_ai.response.model")), replies[0] if replies and replies[0] else None, "\n".join(s for s in system if s),
        users[-1] if users else "",
        _count(attrs, ("gen_ai.usage.input_tokens", "llm.token_count.prompt"), where),
        _count(attrs, ("gen_ai.usage.output_tokens", "llm.token_count.completion"), where),
    )  # fmt: skip


def _documents(path: str, data: bytes) -> Iterator[tuple[int, object]]:
    """(line, decoded request): the whole file as one JSON document, else one per line (the file exporter's)."""
    try:
        yield 1, json.loads(data.decode("utf-8"))
        return
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise TraceError(f"{path}:{exc.lineno}: not JSON ({exc.msg} at column {exc.colno})") from None
    yield from json_lines(path, data)


def read_spans(path: str, data: bytes) -> tuple[list[LlmSpan], int]:
    """The file's LLM spans in file order, and how many other spans it holds (skipped)."""
    spans: list[LlmSpan] = []
    skipped = 0
    for line, doc in _documents(path, data):
        at = f"{path}:{line}:"
        if not isinstance(doc, Mapping) or "resourceSpans" not in doc:
            raise TraceError(f"{at} not an OTLP/JSON traces export (no resourceSpans)")
        for i, rs in enumerate(_list(doc, "resourceSpans", at)):
            w = f"{at} resourceSpans[{i}]"
            if not isinstance(rs, Mapping):
                raise TraceError(f"{w} must be an object")
            res = rs.get("resource") or {}
            resource = attributes(res.get("attributes") if isinstance(res, Mapping) else None, f"{w}.resource")
            resource = {k: v for k, v in resource.items() if k in ("session.id", "gen_ai.conversation.id")}
            for j, ss in enumerate(_list(rs, "scopeSpans", w)):
                if not isinstance(ss, Mapping):
                    raise TraceError(f"{w}.scopeSpans[{j}] must be an object")
                for k, raw in enumerate(_list(ss, "spans", f"{w}.scopeSpans[{j}]")):
                    span = _span(raw, f"{w}.scopeSpans[{j}].spans[{k}]", line, resource)
                    if span is None:
                        skipped += 1
                    else:
                        spans.append(span)
    return spans, skipped
