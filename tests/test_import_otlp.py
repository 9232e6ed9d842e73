"""shp-import --format otlp: spans written by the real OpenTelemetry SDK, encoded by its real OTLP encoder.

The same trajectories go in twice: as OTLP/JSON spans (GenAI attributes in one file, OpenInference ones in
another) and as our JSONL; every standard policy's replay of the two imports must agree row for row.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="the dev extras (opentelemetry-sdk) are not installed")

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

import analysis  # noqa: E402
from shp_ray.importer.cli import main  # noqa: E402
from shp_ray.policy.table import standard_policies  # noqa: E402
from storage.parts import Store  # noqa: E402

POLICIES = standard_policies(random_seeds=(0, 7))
N = 8
SEC = 1_000_000_000


def _loops(seed: int) -> list[dict]:
    """N loops of 1..4 rounds (no embeddings: both imports compute them with the same embedder)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        depth = int(rng.integers(1, 5))
        rounds = []
        for t in range(1, depth + 1):
            last = t == depth
            rounds.append({
                "draft": f"Draft {t} of task {i}: the answer is {'Paris' if rng.random() < 0.5 else 'Lyon'}.",
                "feedback": "" if last else ("APPROVED." if rng.random() < 0.2 else f"Round {t}: say why."),
                "tokens": {"writer_prompt": int(rng.integers(50, 200)), "writer_completion": int(rng.integers(9, 80)),
                           "critic_prompt": 0 if last else int(rng.integers(60, 220)),
                           "critic_completion": 0 if last else int(rng.integers(5, 40))},
            })  # fmt: skip
        out.append({"id": f"loop-{seed}-{i}", "question": f"Where is thing {i}?", "rounds": rounds})
    return out


def _genai(role: str, loop: dict, text: str, tok: dict, t: int) -> tuple[dict, str]:
    """GenAI semantic-convention attributes of one chat call (the reply's messages as a JSON string); the span is
    named as the conventions say ("chat <model>"), so the agent's name tells the Writer from the Critic."""
    request = [{"role": "system", "parts": [{"type": "text", "content": f"You are the {role}."}]},
               {"role": "user", "parts": [{"type": "text", "content": loop["question"]}]}]  # fmt: skip
    attrs = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "tiny-test-model",
        "gen_ai.agent.name": role.capitalize(), "gen_ai.conversation.id": loop["id"],
        "gen_ai.usage.input_tokens": tok[f"{role}_prompt"], "gen_ai.usage.output_tokens": tok[f"{role}_completion"],
        "gen_ai.input.messages": json.dumps(request),
    }  # fmt: skip
    reply = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}])
    return attrs | ({} if t % 2 else {"gen_ai.output.messages": reply}), reply  # odd rounds: the reply in an event


def _openinference(role: str, loop: dict, text: str, tok: dict, t: int) -> tuple[dict, None]:
    """OpenInference attributes of one call of a self-refine loop: no agent name, one span name, so the
    conversation's spans alternate draft, feedback, draft, ..."""
    attrs = {
        "openinference.span.kind": "LLM", "llm.model_name": "tiny-test-model", "session.id": loop["id"],
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Improve the answer.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": loop["question"],
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": text,
        "llm.token_count.prompt": tok[f"{role}_prompt"], "llm.token_count.completion": tok[f"{role}_completion"],
    }  # fmt: skip
    return attrs, None


def _genai_events(role: str, loop: dict, text: str, tok: dict, t: int) -> tuple[dict, list]:
    """GenAI attributes without any message: the messages ride as span events only. Most calls carry the per-message
    events of the conventions up to v1.36 (system / user / assistant messages and the reply as gen_ai.choice), the
    body as the gen_ai.event.content JSON (even rounds) or as the event's own attributes (odd rounds); every third
    round's writer call carries the newer gen_ai.client.inference.operation.details event instead. No agent name:
    the Writer and the Critic are told apart by their system message (a `message` rule)."""
    attrs = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "tiny-test-model",
        "gen_ai.conversation.id": loop["id"],
        "gen_ai.usage.input_tokens": tok[f"{role}_prompt"], "gen_ai.usage.output_tokens": tok[f"{role}_completion"],
    }  # fmt: skip
    if t % 3 == 0 and role == "writer":
        request = [{"role": "system", "parts": [{"type": "text", "content": "You are the writer."}]},
                   {"role": "user", "parts": [{"type": "text", "content": loop["question"]}]}]  # fmt: skip
        reply = [{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}]
        details = {"gen_ai.input.messages": json.dumps(request), "gen_ai.output.messages": json.dumps(reply)}
        return attrs, [("gen_ai.client.inference.operation.details", details)]
    bodies = [("gen_ai.system.message", {"content": f"You are the {role}."}),
              ("gen_ai.user.message", {"role": "user", "content": loop["question"]})]  # fmt: skip
    if role == "critic":  # the draft under review, as history: an input, not the reply
        bodies.append(("gen_ai.assistant.message", {"content": [{"type": "text", "text": "an earlier draft"}]}))
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
    if t % 2:  # the body flattened into the event's attributes (a choice's message as its JSON)
        flat = [(n, {"gen_ai.system": "test", **b}) for n, b in bodies if isinstance(b["content"], str)]
        events = flat + [("gen_ai.choice", {"gen_ai.system": "test", "index": 0, "finish_reason": "stop",
                                            "message": json.dumps(choice["message"])})]  # fmt: skip
    else:
        events = [(n, {"gen_ai.system": "test", "gen_ai.event.content": json.dumps(b)})
                  for n, b in [*bodies, ("gen_ai.choice", choice)]]  # fmt: skip
    return attrs, events


def _duration(role: str, t: int) -> int:
    """Each call's span lasts long enough to tell the Writer's latency from the Critic's and round from round."""
    return (t * SEC) // 4 + (SEC // 8 if role == "critic" else 0)


def _hex_ids(obj: object) -> object:
    """MessageToDict writes bytes as base64; the collector's OTLP/JSON writes trace and span ids as hex."""
    if isinstance(obj, dict):
        return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _hex_ids(v)
                for k, v in obj.items()}  # fmt: skip
    if isinstance(obj, list):
        return [_hex_ids(x) for x in obj]
    return obj


def _export(loops: list[dict], vocabulary) -> list[dict]:
    """One OTLP/JSON ExportTraceServiceRequest per loop, from spans the SDK recorded."""
    requests = []
    for loop in loops:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "writer-critic-loop"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("test-loop")
        clock = 1_700_000_000 * SEC
        root = tracer.start_span("invoke_agent loop", start_time=clock)  # not an LLM call: skipped and counted
        oi = vocabulary is _openinference
        root.set_attribute("openinference.span.kind" if oi else "gen_ai.operation.name",
                           "CHAIN" if oi else "invoke_agent")  # fmt: skip
        ctx = trace.set_span_in_context(root)
        for t, r in enumerate(loop["rounds"], start=1):
            calls = [("writer", r["draft"])] + ([("critic", r["feedback"])] if r["feedback"] else [])
            for role, text in calls:
                clock += SEC
                attrs, reply = vocabulary(role, loop, text, r["tokens"], t)
                name = "ChatCompletion" if vocabulary is _openinference else "chat tiny-test-model"
                span = tracer.start_span(name, context=ctx, start_time=clock, attributes=attrs)
                if isinstance(reply, list):
                    for event, event_attrs in reply:
                        span.add_event(event, event_attrs)
                elif reply is not None and "gen_ai.output.messages" not in attrs:
                    span.add_event("gen_ai.client.inference.operation.details", {"gen_ai.output.messages": reply})
                span.end(end_time=clock + _duration(role, t))
        root.end(end_time=clock + SEC)
        provider.shutdown()
        requests.append(_hex_ids(MessageToDict(encode_spans(exporter.get_finished_spans()))))
    return requests


def _latencies(store) -> dict[tuple, float]:
    cols = ["scenario_id", "round", "writer_latency_s", "critic_latency_s"]
    rows = Store(store).read("rounds", columns=cols).to_pylist()
    return {(r["scenario_id"], r["round"], role): r[f"{role}_latency_s"] for r in rows for role in ("writer", "critic")}


def _replay(store) -> list[tuple]:
    con = analysis.connect(store, policies=POLICIES)
    try:
        return con.sql(
            "SELECT policy, scenario_id, stop_round, reason, operational_tokens, evaluation_tokens"
            " FROM replay ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def _rounds(store) -> list[tuple]:
    cols = ["scenario_id", "round", "draft", "feedback", "writer_prompt_tokens", "writer_completion_tokens",
            "critic_prompt_tokens", "critic_completion_tokens"]  # fmt: skip
    return sorted(tuple(r.values()) for r in Store(store).read("rounds", columns=cols).to_pylist())


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("otlp")
    genai, oi = _loops(1), _loops(2)
    (folder / "genai.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _export(genai, _genai)))
    doc = _export(oi, _openinference)  # one JSON document for the file: all requests' resourceSpans
    (folder / "openinference.json").write_text(
        json.dumps({"resourceSpans": [rs for d in doc for rs in d["resourceSpans"]]}, indent=1)
    )
    (folder / "ours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in genai + oi))
    events = _loops(3)
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _export(events, _genai_events)))
    (folder / "events-ours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in events))
    return folder


def test_otlp_imports_replay_like_the_same_trajectories_as_jsonl(exports, tmp_path, capsys) -> None:
    ours, spans = tmp_path / "ours", tmp_path / "spans"
    assert main([str(exports / "ours.jsonl"), "--store", str(ours), "--embedder", "fake-hash"]) == 0
    for name in ("genai.jsonl", "openinference.json"):
        assert main([str(exports / name), "--store", str(spans), "--format", "otlp", "--embedder", "fake-hash"]) == 0
    out = capsys.readouterr().out
    assert f"imported {N} trajectories" in out and f"; {N} spans that are not LLM calls skipped)" in out
    assert _rounds(spans) == _rounds(ours)
    got, want = _replay(spans), _replay(ours)
    assert len(got) == 2 * N * len(POLICIES) and got == want
    assert {"critic", "entropy", "failsafe"} & {r[3] for r in got}


def test_messages_carried_as_span_events_only_import_like_the_same_trajectories_as_jsonl(exports, tmp_path) -> None:
    """No message attribute at all: the requests and replies are read from the span's events (the per-message events,
    with the body as JSON or as attributes, and the operation details event), the roles from the system messages they
    carry; each span's duration is its call's latency."""
    ours, spans = tmp_path / "ours", tmp_path / "spans"
    assert main([str(exports / "events-ours.jsonl"), "--store", str(ours), "--embedder", "fake-hash"]) == 0
    roles = ["--otlp-role", "critic=message:the critic", "--otlp-role", "writer=message:the writer"]
    argv = [str(exports / "events.jsonl"), "--store", str(spans), "--format", "otlp", "--embedder", "fake-hash"]
    assert main([*argv, *roles]) == 0
    assert _rounds(spans) == _rounds(ours)
    assert _replay(spans) == _replay(ours)
    want = {
        (loop["id"], t, role): _duration(role, t) / SEC if role == "writer" or r["feedback"] else 0.0
        for loop in _loops(3)
        for t, r in enumerate(loop["rounds"], start=1)
        for role in ("writer", "critic")
    }
    assert _latencies(spans) == pytest.approx(want)
    assert set(_latencies(ours).values()) == {0.0}  # our JSONL carries no latency


def test_a_directory_of_exports_imports_once(exports, tmp_path, capsys) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for name in ("genai.jsonl", "openinference.json"):
        (folder / name).write_bytes((exports / name).read_bytes())
    store = tmp_path / "store"
    argv = [str(folder), "--store", str(store), "--format", "otlp", "--embedder", "fake-hash"]
    assert main(argv) == 0
    assert f"imported {2 * N} trajectories" in capsys.readouterr().out
    parts = sorted(store.rglob("*.parquet"))
    assert main(argv) == 0
    assert "nothing added" in capsys.readouterr().out and sorted(store.rglob("*.parquet")) == parts
    # other rules are another reading of the same spans: here every span is the writer's (no critique)
    assert main([*argv, "--otlp-role", "writer=span:chat"]) == 0
    gens = Store(store).read("generations").to_pylist()
    assert len(gens) == 2


def test_rules_name_writer_and_critic_by_their_prompt_or_refuse_a_span_they_leave_out(exports, tmp_path, capsys):
    genai = str(exports / "genai.jsonl")
    by_default, by_prompt = tmp_path / "default", tmp_path / "prompt"
    assert main([genai, "--store", str(by_default), "--format", "otlp", "--embedder", "fake-hash"]) == 0
    roles = ["--otlp-role", "critic=message:the critic", "--otlp-role", "writer=message:the writer"]
    assert main([genai, "--store", str(by_prompt), "--format", "otlp", "--embedder", "fake-hash", *roles]) == 0
    assert _rounds(by_prompt) == _rounds(by_default)
    capsys.readouterr()
    bad = tmp_path / "bad"
    assert main([genai, "--store", str(bad), "--format", "otlp", "--embedder", "fake-hash", *roles[:2]]) == 2
    err = capsys.readouterr().err
    assert f"shp-import: {genai}:" in err and "matches no --otlp-role rule while others of it do" in err
    assert err.count("\n") == 1 and not bad.exists()
    with pytest.raises(SystemExit, match="2"):  # a usage error: not --format otlp
        main([genai, "--store", str(bad), "--otlp-role", "critic=agent:x"])
    assert "--otlp-role applies to --format otlp only" in capsys.readouterr().err


def _a_loop_of_rounds(lines: list[str]) -> int:
    """The index of the first request holding a loop of two rounds or more (spans[0]: its first writer call)."""
    return next(i for i, line in enumerate(lines) if len(_spans(json.loads(line))) >= 4)


def _spans(req: dict) -> list[dict]:
    return req["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _attr(span: dict, key: str) -> dict:
    return next(a for a in span["attributes"] if a["key"] == key)


def _no_conversation(req: dict) -> str:
    span = _spans(req)[0]
    span["attributes"].remove(_attr(span, "gen_ai.conversation.id"))
    span.pop("traceId")
    return "belongs to no loop"


def _no_text(req: dict) -> str:
    span = _spans(req)[0]
    span.pop("events", None)
    if any(a["key"] == "gen_ai.output.messages" for a in span["attributes"]):
        span["attributes"].remove(_attr(span, "gen_ai.output.messages"))
    return "writer span with no text"


def _critic_first(req: dict) -> str:
    _attr(_spans(req)[0], "gen_ai.agent.name")["value"] = {"stringValue": "Critic"}
    return "cannot be rebuilt: a critic span with no draft before it"


def _bad_usage(req: dict) -> str:
    _attr(_spans(req)[0], "gen_ai.usage.input_tokens")["value"] = {"intValue": "many"}
    return ".intValue must be an integer (or its decimal string), got 'many'"


@pytest.mark.parametrize("change", [_no_conversation, _no_text, _critic_first, _bad_usage])
def test_a_bad_span_is_one_line_naming_file_line_and_span(exports, tmp_path, capsys, change) -> None:
    lines = (exports / "genai.jsonl").read_text().splitlines()
    at = _a_loop_of_rounds(lines)
    req = json.loads(lines[at])
    says = change(req)
    lines[at] = json.dumps(req)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    assert main([str(path), "--store", str(store), "--format", "otlp", "--embedder", "fake-hash"]) == 2
    err = capsys.readouterr().err
    sid = _spans(req)[0]["spanId"]
    assert err.startswith(f"shp-import: {path}:{at + 1}:") and f"(span {sid})" in err and says in err, err
    assert err.count("\n") == 1 and not list(store.rglob("*.parquet"))


def test_a_cut_line_and_a_file_without_spans_say_so(exports, tmp_path, capsys) -> None:
    lines = (exports / "genai.jsonl").read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([lines[0], lines[1][:50], *lines[2:]]) + "\n")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"resourceSpans": []}))
    for path, says in ((cut, f"{cut}:2: not JSON"), (empty, f"{empty}: no LLM spans")):
        assert main([str(path), "--store", str(tmp_path / "store"), "--format", "otlp"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"shp-import: {says}") and err.count("\n") == 1, err
    assert not (tmp_path / "store").exists()


def test_a_message_event_with_a_bad_body_is_one_line_naming_the_span_and_event(exports, tmp_path, capsys) -> None:
    lines = (exports / "events.jsonl").read_text().splitlines()
    at = _a_loop_of_rounds(lines)
    req = json.loads(lines[at])
    span = _spans(req)[2]  # round 2's writer span: per-message events, the bodies as gen_ai.event.content
    i = next(i for i, e in enumerate(span["events"]) if e["name"] == "gen_ai.choice")
    _attr(span["events"][i], "gen_ai.event.content")["value"] = {"stringValue": '{"message": {"content": "cut'}
    lines[at] = json.dumps(req)
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "store"
    assert main([str(path), "--store", str(store), "--format", "otlp"]) == 2
    err = capsys.readouterr().err
    says = f"(span {span['spanId']}): events[{i}] (gen_ai.choice).attributes.gen_ai.event.content is not JSON"
    assert err.startswith(f"shp-import: {path}:{at + 1}:") and says in err and err.count("\n") == 1, err
    assert not store.exists()


def test_spans_without_a_conversation_id_are_a_trace_and_are_taken_in_start_order(exports, tmp_path, capsys) -> None:
    """No gen_ai.conversation.id and the spans written in reverse: each trace is one trajectory (its id the trace
    id), its spans ordered by their start times, so the rounds are the same as with the ids in file order."""
    lines = (exports / "genai.jsonl").read_text().splitlines()
    traces = {}
    for n, line in enumerate(lines):
        req = json.loads(line)
        spans = _spans(req)
        for span in spans:
            span["attributes"] = [a for a in span["attributes"] if a["key"] != "gen_ai.conversation.id"]
        spans.reverse()
        traces[spans[0]["traceId"]] = n
        lines[n] = json.dumps(req)
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    by_trace, by_id = tmp_path / "by-trace", tmp_path / "by-id"
    assert main([str(path), "--store", str(by_trace), "--format", "otlp", "--embedder", "fake-hash"]) == 0
    assert (
        main([str(exports / "genai.jsonl"), "--store", str(by_id), "--format", "otlp", "--embedder", "fake-hash"]) == 0
    )
    ids = {json.loads(line)["id"]: n for n, line in enumerate((exports / "ours.jsonl").read_text().splitlines())}
    name = {tid: next(i for i, m in ids.items() if m == n) for tid, n in traces.items()}  # trace id -> loop id
    got = sorted((name[r[0]], *r[1:]) for r in _rounds(by_trace))
    assert got == _rounds(by_id)
