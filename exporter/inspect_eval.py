"""Trajectories as an inspect_ai ``.eval`` log (a zip of JSON members), written without inspect_ai.

Each trajectory is one sample (its task's id, its epoch): the conversation is the question, then each round's
draft as an assistant turn and its critique as a user turn; the events are each round's Writer call and Critic call
as ``model`` events (the Critic's with model role ``critic``: its reply is no turn of the Writer's conversation),
with the stored tokens as their usage, and each round's scores as an intermediate ``score`` event after its draft.
The sample's scores are the last exported round's (the returned draft's), its output the last draft, its model and
role usage the sums. ``shp-import --format inspect`` reads such a log back into the same rounds, tokens and scores.

Members are deflated (inspect_ai writes zstd, and reads both), the archive's dates are the generation's, so the
same store exports to the same bytes.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from exporter.trajectories import Trajectory

LOG_VERSION = 2  # inspect_ai's EvalLog.version
CRITIC_ROLE = "critic"


@dataclass(frozen=True)
class EvalHeader:
    task: str  # the eval's task name
    model: str
    created: datetime  # the generation's creation (the archive's dates)
    metadata: dict  # what the log says of the store it came from


def _usage(prompt: int, completion: int) -> dict:
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}


def _add(total: dict, usage: dict) -> None:
    for k, v in usage.items():
        total[k] = total.get(k, 0) + v


def _message(mid: str, role: str, text: str, model: str | None = None) -> dict:
    out: dict[str, str | None] = {"id": mid, "content": text, "role": role}
    if role == "assistant":
        out |= {"source": "generate", "model": model}
    return out


def _model_event(model: str, role: str | None, history: list[dict], reply: dict, usage: dict) -> dict:
    output = {"model": model, "choices": [{"message": reply, "stop_reason": "stop"}], "completion": reply["content"],
              "usage": usage}  # fmt: skip
    event = {"event": "model", "model": model, "input": history, "tools": [], "tool_choice": "none", "config": {},
             "output": output}  # fmt: skip
    return event | ({"role": role} if role else {})


def _score_event(name: str, value: float, target: object) -> dict:
    return {"event": "score", "score": {"value": value}, "target": target, "intermediate": True, "scorer": name}


def sample(traj: Trajectory, model: str) -> dict:
    """One trajectory as an inspect_ai EvalSample (a plain dict, as the log's JSON holds it)."""
    sid = f"{traj.scenario_id}"
    target: object = list(traj.answers) if len(traj.answers) > 1 else (traj.answers[0] if traj.answers else "")
    conversation = [_message(f"{sid}:q", "user", traj.question)]
    events: list[dict] = []
    writer: dict[str, int] = {}  # token counts by usage field, summed over the rounds
    critic: dict[str, int] = {}
    for r in traj.rounds:
        t = r["round"]
        usage = _usage(r["writer_prompt_tokens"], r["writer_completion_tokens"])
        draft = _message(f"{sid}:w{t}", "assistant", r["draft"], model)
        events.append(_model_event(model, None, list(conversation), draft, usage))
        _add(writer, usage)
        conversation.append(draft)
        events += [_score_event(n, v, target) for n, v in sorted(traj.scores.get(t, {}).items()) if math.isfinite(v)]
        if r["feedback"]:
            usage = _usage(r["critic_prompt_tokens"], r["critic_completion_tokens"])
            critique = _message(f"{sid}:c{t}", "assistant", r["feedback"], model)
            asked = [_message(f"{sid}:d{t}", "user", r["draft"])]  # the critic's prompt is not stored: its draft
            events.append(_model_event(model, CRITIC_ROLE, asked, critique, usage))
            _add(critic, usage)
            conversation.append(_message(f"{sid}:f{t}", "user", r["feedback"]))
    last = traj.rounds[-1]
    final = {n: {"value": v} for n, v in sorted(traj.scores.get(last["round"], {}).items()) if math.isfinite(v)}
    usage_total = dict(writer)
    _add(usage_total, critic)
    meta = {"scenario_id": traj.scenario_id, "rounds": len(traj.rounds)}
    if traj.stop is not None:
        meta |= {"policy": traj.stop.policy, "stop_round": traj.stop.round, "reason": traj.stop.reason,
                 "operational_tokens": traj.stop.operational_tokens}  # fmt: skip
    return {
        "id": traj.task_id, "epoch": traj.epoch, "input": traj.question, "target": target,
        "messages": conversation, "scores": final, "metadata": meta, "events": events,
        "output": {"model": model, "completion": last["draft"], "usage": _usage(last["writer_prompt_tokens"],
                   last["writer_completion_tokens"]),
                   "choices": [{"message": _message(f"{sid}:w{last['round']}", "assistant", last["draft"], model),
                                "stop_reason": "stop"}]},
        "model_usage": {model: usage_total} if usage_total else {},
        "role_usage": {CRITIC_ROLE: critic} if critic else {},
    }  # fmt: skip


def _summary(s: dict) -> dict:
    keep = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage", "role_usage")
    return {k: s[k] for k in keep} | {"completed": True, "message_count": len(s["messages"])}


def _results(samples: Sequence[dict]) -> dict:
    """Each final score's mean, as inspect_ai's results list them (a scorer per score name)."""
    names = sorted({n for s in samples for n in s["scores"]})
    scores = []
    for n in names:
        values = [s["scores"][n]["value"] for s in samples if n in s["scores"]]
        mean = {"name": "mean", "value": sum(values) / len(values)}
        scores.append({"name": n, "scorer": n, "scored_samples": len(values), "metrics": {"mean": mean}})
    return {"total_samples": len(samples), "completed_samples": len(samples), "scores": scores}


def header(head: EvalHeader, samples: Sequence[dict]) -> dict:
    """The log's header (EvalLog without its samples)."""
    created = head.created.isoformat()
    ids = list(dict.fromkeys(s["id"] for s in samples))
    spec = {
        "eval_id": head.metadata.get("gen_id", ""), "run_id": head.metadata.get("gen_id", ""), "created": created,
        "task": head.task, "task_id": head.task, "task_version": 0, "model": head.model,
        "dataset": {"name": head.task, "samples": len(ids), "sample_ids": ids, "shuffled": False},
        "config": {"epochs": max((s["epoch"] for s in samples), default=1)}, "metadata": head.metadata,
        "scorers": [{"name": n, "options": {}, "metrics": [], "metadata": {}}
                    for n in sorted({n for s in samples for n in s["scores"]})],
    }  # fmt: skip
    return {"version": LOG_VERSION, "status": "success", "eval": spec, "plan": {"name": "plan", "steps": []},
            "results": _results(samples), "stats": {"started_at": created, "completed_at": created}}  # fmt: skip


def write_eval(out, head: EvalHeader, samples: Sequence[dict]) -> None:
    """The ``.eval`` archive to the open binary file ``out``: header, summaries, one member per sample x epoch."""
    when = head.created.timetuple()[:6]

    def put(archive: zipfile.ZipFile, name: str, doc: object) -> None:
        info = zipfile.ZipInfo(name, date_time=when)
        info.compress_type = zipfile.ZIP_DEFLATED
        archive.writestr(info, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))

    with zipfile.ZipFile(out, "w") as archive:
        for s in samples:
            put(archive, f"samples/{s['id']}_epoch_{s['epoch']}.json", s)
        put(archive, "summaries.json", [_summary(s) for s in samples])
        put(archive, "header.json", header(head, samples))
