"""``--format openai-chat``: a writer/critic loop logged as its chat-completion calls, one loop per line.

    {"id": "q1", "question": "...", "answers": ["..."],      id required; question, answers optional
     "calls": [                                               in the order they were made:
       {"agent": "writer",                                    writer, critic, writer, critic, ..., [writer]
        "request": {"model": "m", "messages": [{"role": "system", "content": "..."},
                                               {"role": "user", "content": "..."}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "<draft>"},
                                  "logprobs": {"content": [{"logprob": -0.1}, ...]}}],   logprobs optional
                     "usage": {"prompt_tokens": 120, "completion_tokens": 40}}},
       {"agent": "critic", "request": {...}, "response": {... "content": "<critique>" ...}},
       ...]}

Round t is the t-th writer call (its reply the draft x_t, its usage the writer's tokens) and the critic call
right after it, if any (its reply the critique f_t, its usage the critic's tokens). A writer reply that carries
token log-probabilities (``choices[0].logprobs.content[].logprob``, a call made with ``logprobs: true``) gives its
draft's ``draft_logprobs`` row. ``request`` is the logged
request body (only its messages are read: the question, when not given, is the last user message of the first
writer request); ``response`` the chat.completion object as the endpoint returned it. Other top-level keys are
kept as the scenario's metadata.
"""

from __future__ import annotations

from collections.abc import Mapping

from shp_ray.importer.traces import Trace, TraceError, check_file, json_lines, parse_trace
from shp_ray.policy.checks import check_int
from shp_ray.providers.reply import reply_logprobs

AGENTS = ("writer", "critic")


def _reply(call: Mapping[str, object], where: str) -> tuple[str, int, int]:
    """(content, prompt tokens, completion tokens) of one logged call's response."""
    response = call.get("response")
    if not isinstance(response, Mapping):
        raise TraceError(f"{where}.response must be a chat.completion object")
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise TraceError(f"{where}.response.choices must be a non-empty list")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        raise TraceError(f"{where}.response.choices[0].message.content must be a string")
    usage = response.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise TraceError(f"{where}.response.usage must be an object")
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        counts.append(check_int(f"{where}.response.usage.{key}", usage.get(key, 0), 0, TraceError))
    return content, counts[0], counts[1]


def _question(call: Mapping[str, object]) -> str:
    request = call.get("request")
    messages = request.get("messages") if isinstance(request, Mapping) else None
    users = [m.get("content") for m in messages or [] if isinstance(m, Mapping) and m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


def to_trace(raw: object, where: str, line: int) -> Trace:
    """The trajectory of one logged loop (see the module's docstring for the shape)."""
    if not isinstance(raw, Mapping):
        raise TraceError(f"{where}: a logged loop must be a JSON object, got {type(raw).__name__}")
    calls = raw.get("calls")
    if not isinstance(calls, list) or not calls:
        raise TraceError(f"{where}: calls must be a non-empty list of logged chat-completion calls")
    rounds: list[dict[str, object]] = []
    for i, call in enumerate(calls):
        at = f"{where}: calls[{i}]"
        agent = call.get("agent") if isinstance(call, Mapping) else None
        if agent not in AGENTS:
            raise TraceError(f"{at}.agent must be one of {list(AGENTS)}, got {agent!r}")
        expected = "writer" if i % 2 == 0 else "critic"
        if agent != expected:
            raise TraceError(f"{at}: expected a {expected} call (writer and critic calls alternate, writer first)")
        content, prompt, completion = _reply(call, at)
        if agent == "writer":
            rounds.append({"draft": content, "tokens": {"writer_prompt": prompt, "writer_completion": completion}})
            if (lps := reply_logprobs(call["response"])) is not None:
                rounds[-1]["logprobs"] = list(lps)
        else:
            rounds[-1]["feedback"] = content
            rounds[-1]["tokens"] |= {"critic_prompt": prompt, "critic_completion": completion}  # type: ignore[operator]
    body = {k: v for k, v in raw.items() if k != "calls"}
    body["rounds"] = rounds
    if not body.get("question"):
        body["question"] = _question(calls[0])
    return parse_trace(body, where, line)


def read_openai_chat(path: str, data: bytes) -> list[Trace]:
    return check_file(path, [to_trace(obj, f"{path}:{n}", n) for n, obj in json_lines(path, data)])
