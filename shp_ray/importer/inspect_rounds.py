"""``--format inspect``: inspect_ai logs (``.eval`` or ``.json``) rebuilt into trajectories, one per sample x epoch.

The log is read by :mod:`shp_ray.importer.inspect_log`. Here each sample becomes a trajectory (no log has a
"round"; the rules are in docs/your-loop-scores-import.md):

- its id is the sample's id for epoch 1 and ``<id>#e<epoch>`` after (the store's epochs, ``generation.epochs``);
  the task is the sample's id, the question its input, the gold answers its target;
- the model calls of its solvers (``model`` events outside the scorers' spans) in log order: a call whose reply
  became an assistant turn of the sample's conversation (``messages``) is the Writer's, and opens round t (its
  reply the draft x_t, its usage the writer's tokens); a call whose reply did not (a critique model called on the
  side, as inspect_ai's ``self_critique`` does), or any call of a model role named like critic/review/judge, is
  the Critic's: the critique f_t of the draft before it, with its tokens. ``--inspect-role ROLE=FIELD:REGEX``
  (``rules``; FIELD ``role``: the call's model role, ``model``: its model's name, ``message``: the system
  messages of its input) overrides this: a call matching a rule is that rule's (critic rules tried first); a call
  matching none is decided by its reply as above (given rules replace the default one, ``critic=role:...``, as
  ``--otlp-role``'s do). A round with no Critic call takes as its
  critique the user turns that follow its draft in the conversation (a template or a person: no tokens);
- a sample with no model events: its conversation's assistant turns are the drafts, the user turns after each
  its critique, and no tokens;
- its scores (``scores``) are the last round's; an intermediate score (``score`` events of the solvers) is the
  round of the draft before it. C / I / P / N, yes / no, booleans and numbers are read as inspect_ai's
  ``value_to_float`` reads them; a dict of them is one score per key (``name.key``); anything else is kept as
  no value.

Every problem is one :class:`TraceError` naming ``file:member:path`` (``log.eval:samples/q1_epoch_1.json:
events[7].output``) and the field.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from shp_ray.generation.datasets import EPOCH_MARK  # epoch e > 1 of task <id> is scenario <id>#e<e>
from shp_ray.importer.inspect_log import LogSample, read_log
from shp_ray.importer.otlp import Rule, first_role, parse_rule
from shp_ray.importer.traces import Trace, TraceError, check_file, parse_trace
from shp_ray.policy.checks import check_int
from shp_ray.providers.reply import reply_logprobs
from storage.schemas import MAX_TOKENS

ROLES = ("system", "user", "assistant", "tool")  # inspect_ai's ChatMessage roles
FIELDS = ("role", "model", "message")  # what an --inspect-role rule reads of a model call
# a model role that names the Critic: the names --format otlp's default rules read as the Critic's
DEFAULT_RULES = ("critic=role:(?i)critic|critique|review|judge|feedback",)
SCORER_SPANS = ("scorers", "scorer")
ATTACHMENT = "attachment://"
VALUES = {"c": 1.0, "i": 0.0, "p": 0.5, "n": 0.0, "yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


class _Sample:
    """One sample being read: its place, its attachments, and the text and count readers that name the field."""

    def __init__(self, sample: LogSample) -> None:
        self.where, self.raw = sample.where, sample.data
        att = self.raw.get("attachments") or {}
        self.attachments = att if isinstance(att, Mapping) else {}

    def fail(self, path: str, what: str) -> TraceError:
        return TraceError(f"{self.where}:{path}: {what}")

    def list(self, key: str) -> list:
        got = self.raw.get(key) or []
        if not isinstance(got, list):
            raise self.fail(key, f"must be a list, got {type(got).__name__}")
        return got

    def text(self, value: object, path: str) -> str:
        """A message's text: a string (or an attachment) or the text parts of a content list."""
        if value is None:
            return ""
        if isinstance(value, str):
            if value.startswith(ATTACHMENT):
                key = value[len(ATTACHMENT) :]
                if not isinstance(self.attachments.get(key), str):
                    raise self.fail(path, f"names attachment {key!r}, which the sample does not hold")
                return self.attachments[key]
            return value
        if isinstance(value, list):
            parts = []
            for i, part in enumerate(value):
                if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                    raise self.fail(f"{path}[{i}]", "a content part must be an object with a type")
                if part["type"] == "text":
                    parts.append(self.text(part.get("text"), f"{path}[{i}].text"))
            return "".join(parts)
        raise self.fail(path, f"must be a string or a list of content parts, got {type(value).__name__}")

    def count(self, usage: Mapping, key: str, path: str) -> int:
        n = check_int(f"{self.where}:{path}.{key}:", usage.get(key) or 0, 0, TraceError)
        if n > MAX_TOKENS:
            raise self.fail(f"{path}.{key}", f"must be at most {MAX_TOKENS:,} (one call's tokens), got {n!r}")
        return n


def _conversation(s: _Sample) -> list[tuple[str, str, str]]:
    """(role, id, text) of every message of the sample's conversation; an unknown role is refused."""
    out = []
    for i, m in enumerate(s.list("messages")):
        if not isinstance(m, Mapping):
            raise s.fail(f"messages[{i}]", "a message must be an object")
        if m.get("role") not in ROLES:
            raise s.fail(f"messages[{i}].role", f"unknown message role {m.get('role')!r} (known: {', '.join(ROLES)})")
        out.append((m["role"], str(m.get("id") or ""), s.text(m.get("content"), f"messages[{i}].content")))
    return out


def _solver_events(s: _Sample) -> list[tuple[int, Mapping]]:
    """(index, event) of the model and score events outside the scorers' spans, in log order."""
    scoring: set[str] = set()
    out = []
    for i, e in enumerate(s.list("events")):
        if not isinstance(e, Mapping):
            raise s.fail(f"events[{i}]", "an event must be an object")
        if e.get("event") == "span_begin" and (e.get("type") in SCORER_SPANS or e.get("parent_id") in scoring):
            scoring.add(str(e.get("id")))
        elif e.get("event") in ("model", "score") and e.get("span_id") not in scoring:
            out.append((i, e))
    return out


def _call(s: _Sample, i: int, e: Mapping) -> tuple[str, str, int, int]:
    """(reply text, reply message id, prompt tokens, completion tokens) of one model event."""
    at = f"events[{i}].output"
    output = e.get("output")
    if not isinstance(output, Mapping):
        raise s.fail(at, "a model event's output must be an object")
    choices = output.get("choices") or []
    message = choices[0].get("message") if isinstance(choices, list) and choices else None
    if isinstance(message, Mapping):
        text, mid = s.text(message.get("content"), f"{at}.choices[0].message.content"), str(message.get("id") or "")
    else:
        text, mid = s.text(output.get("completion"), f"{at}.completion"), ""
    usage = output.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise s.fail(f"{at}.usage", "must be an object")
    # inspect_ai's input_tokens exclude the cached ones: the whole prompt is the three together (ModelUsage)
    prompt = sum(s.count(usage, k, f"{at}.usage") for k in ("input_tokens", "input_tokens_cache_read",
                                                               "input_tokens_cache_write"))  # fmt: skip
    return text, mid, prompt, s.count(usage, "output_tokens", f"{at}.usage")


def _values(s: _Sample, name: str, score: object, path: str) -> dict[str, float | None]:
    """One inspect_ai Score as our scores: value_to_float's reading; a dict value one score per key."""
    if not isinstance(score, Mapping) or "value" not in score:
        raise s.fail(path, "a score must be an object with a value")
    value = score["value"]
    items = {f"{name}.{k}": v for k, v in value.items()} if isinstance(value, Mapping) else {name: value}
    out: dict[str, float | None] = {}
    for key, v in items.items():
        if isinstance(v, str) and v.strip().lower() in VALUES:
            out[key] = VALUES[v.strip().lower()]
        elif isinstance(v, (bool, int, float)):
            out[key] = float(v) if math.isfinite(v) else None
        else:
            try:
                out[key] = float(v) if isinstance(v, str) and math.isfinite(float(v)) else None
            except ValueError:
                out[key] = None
    return out


def _no_text(s: _Sample, path: str, role: str) -> TraceError:
    return s.fail(path, f"a {role} turn with no text (a tool call, or an empty reply): the round cannot be rebuilt")


def _inputs(s: _Sample, e: Mapping) -> list:
    """A model event's input messages: as logged, or (inspect_ai >= 0.3.2xx condenses them) the ``input_refs`` ranges
    ``[start, end)`` of the sample's message pool ``events_data.messages``."""
    if isinstance(e.get("input"), list) and e["input"]:
        return e["input"]
    pool = s.raw.get("events_data")
    pool = pool.get("messages") if isinstance(pool, Mapping) else None
    refs = e.get("input_refs")
    if not isinstance(pool, list) or not isinstance(refs, list):
        return []
    return [m for ref in refs if isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, int) for x in ref)
            for m in pool[ref[0] : ref[1]]]  # fmt: skip


def _fields(s: _Sample, i: int, e: Mapping, rules: Sequence[Rule]) -> dict[str, str]:
    """What the rules read of model event ``i``: its model role, its model, its input's system messages (read only
    when a rule asks for them)."""
    system = ""
    if any(r.field == "message" for r in rules):
        inputs = _inputs(s, e)
        system = "\n".join(s.text(m.get("content"), f"events[{i}].input[{j}].content") for j, m in enumerate(inputs)
                           if isinstance(m, Mapping) and m.get("role") == "system")  # fmt: skip
    role = e.get("role")
    return {"role": role if isinstance(role, str) else "", "model": str(e.get("model") or ""), "message": system}


def _from_events(s: _Sample, events: Sequence[tuple[int, Mapping]], conv: list,
                 rules: Sequence[Rule]) -> list[dict[str, object]]:  # fmt: skip
    """The rounds of the sample's model calls (see the module docstring)."""
    ids = {mid for role, mid, _ in conv if role == "assistant" and mid}
    texts = {text for role, _, text in conv if role == "assistant"}  # a reply logged without its message id
    rounds: list[dict[str, object]] = []
    for i, e in events:
        if e.get("event") == "score":
            if rounds and e.get("intermediate"):
                name = str(e.get("scorer") or "score")
                rounds[-1]["scores"] |= _values(s, name, e.get("score"), f"events[{i}].score")  # type: ignore[operator]
            continue
        text, mid, prompt, completion = _call(s, i, e)
        named = first_role(rules, _fields(s, i, e, rules))
        critic = named == "critic" if named else not (mid in ids if mid else text in texts)
        if not text.strip():
            raise _no_text(s, f"events[{i}].output", "critic" if critic and rounds else "writer")
        if not critic:
            rounds.append({"draft": text, "id": mid, "scores": {},
                           "tokens": {"writer_prompt": prompt, "writer_completion": completion}})  # fmt: skip
            if (lps := reply_logprobs(e["output"])) is not None:  # ModelOutput.choices[0].logprobs, OpenAI's shape
                rounds[-1]["logprobs"] = list(lps)
            continue
        if not rounds or "feedback" in rounds[-1]:
            what = "no draft before it" if not rounds else "a second critique of the same draft"
            raise s.fail(f"events[{i}]", f"a critic call (not a turn of the conversation) with {what}")
        rounds[-1]["feedback"] = text
        rounds[-1]["tokens"] |= {"critic_prompt": prompt, "critic_completion": completion}  # type: ignore[operator]
    return rounds


def _from_messages(s: _Sample, conv: list) -> list[dict[str, object]]:
    rounds: list[dict[str, object]] = []
    for i, (role, mid, text) in enumerate(conv):
        if role == "assistant":
            if not text.strip():
                raise _no_text(s, f"messages[{i}].content", "assistant")
            rounds.append({"draft": text, "id": mid, "scores": {}})
    return rounds


def _user_feedback(rounds: list[dict[str, object]], conv: list) -> None:
    """A round with no Critic call: the user turns after its draft in the conversation are its critique."""
    at = {mid: i for i, (role, mid, _) in enumerate(conv) if role == "assistant" and mid}
    for r in rounds[:-1]:
        if "feedback" in r or r["id"] not in at:
            continue
        turns = []
        for role, _, text in conv[at[r["id"]] + 1 :]:  # type: ignore[index]
            if role == "assistant":
                break
            if role == "user":
                turns.append(text)
        r["feedback"] = "\n\n".join(turns)


def _question(s: _Sample) -> str:
    value = s.raw.get("input")
    if isinstance(value, list):  # a list of messages: its last user message
        users = [m for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        return s.text(users[-1].get("content"), "input") if users else ""
    return s.text(value, "input")


def sample_trace(sample: LogSample, header: Mapping[str, object], rules: Sequence[Rule] = ()) -> Trace:
    """One sample x epoch as a trajectory (the rules: the module docstring; ``rules``: the parsed --inspect-role)."""
    s = _Sample(sample)
    sid, epoch = s.raw.get("id"), s.raw.get("epoch", 1)
    if isinstance(sid, bool) or not isinstance(sid, (str, int)) or str(sid) == "":
        raise s.fail("id", f"must be a non-empty string or an integer, got {sid!r}")
    epoch = check_int(f"{s.where}:epoch:", epoch, 1, TraceError)
    conv = _conversation(s)
    events = _solver_events(s)
    if any(e.get("event") == "model" for _, e in events):
        rounds = _from_events(s, events, conv, rules or parse_rules(()))
    else:
        rounds = _from_messages(s, conv)
    if not rounds:
        raise s.fail("messages", "the sample has no assistant turn: no draft, no round")
    _user_feedback(rounds, conv)
    finals = s.raw.get("scores") or {}
    if not isinstance(finals, Mapping):
        raise s.fail("scores", "must be an object of scorer -> score")
    for name, score in finals.items():
        rounds[-1]["scores"] |= _values(s, str(name), score, f"scores.{name}")  # type: ignore[operator]
    for r in rounds:
        del r["id"]
    target = s.raw.get("target")
    answers = [t for t in target if isinstance(t, str)] if isinstance(target, list) else target or None
    spec = header.get("eval") if isinstance(header.get("eval"), Mapping) else {}
    meta = {"inspect_sample_id": sid, "inspect_epoch": epoch, "inspect_task": spec.get("task"),  # type: ignore[union-attr]
            "inspect_model": spec.get("model"), "inspect_model_usage": s.raw.get("model_usage") or {},  # type: ignore[union-attr]
            "inspect_metadata": s.raw.get("metadata") or {}}  # fmt: skip
    error = s.raw.get("error")
    if isinstance(error, Mapping) and error.get("message"):  # a sample that failed: the rounds it logged, and why
        meta["inspect_error"] = str(error["message"])
    body = {"id": str(sid) if epoch == 1 else f"{sid}{EPOCH_MARK}{epoch}", "question": _question(s),
            "answers": answers, "rounds": rounds, **meta}  # fmt: skip
    return replace(parse_trace(body, s.where, sample.index + 1), task_id=str(sid), epoch=epoch)


def parse_rules(rule_specs: Sequence[str]) -> list[Rule]:
    return [parse_rule(r, "--inspect-role", FIELDS) for r in (rule_specs or DEFAULT_RULES)]


def read_inspect(path: str, data: bytes) -> list[Trace]:
    return read_inspect_with(path, data)[1]


def read_inspect_with(path: str, data: bytes, rule_specs: Sequence[str] = ()) -> tuple[bytes, list[Trace]]:
    """(what the generation id hashes, the trajectories) of the log read with the --inspect-role rules given
    (none: the default). The same log read with other rules is another generation; with none, the log's bytes."""
    rules = parse_rules(rule_specs)
    log = read_log(path, data)
    traces = check_file(path, [sample_trace(s, log.header, rules) for s in log.samples])
    if not rule_specs:
        return data, traces
    return hashlib.sha256("\0".join(rule_specs).encode() + b"\0" + data).digest(), traces
