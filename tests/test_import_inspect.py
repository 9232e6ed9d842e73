"""shp-import --format inspect and shp-export --format inspect: logs written by inspect_ai itself (its mockllm model),
read here without inspect_ai; our export read back by inspect_ai's own read_eval_log.

The solver records what it did (each draft, critique and their usage) as it runs; the same trajectories written as
our JSONL must import into the same rounds and scores, and every standard policy's replay of the two must agree.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("inspect_ai", reason="the dev extras (inspect-ai) are not installed")

from inspect_ai import Task, eval  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log, write_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageSystem,
    ChatMessageUser,
    Logprob,
    Logprobs,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes, score  # noqa: E402
from inspect_ai.solver import Generate, TaskState, solver  # noqa: E402

import analysis  # noqa: E402
from exporter import main as export_main  # noqa: E402
from shp_ray.importer.cli import main  # noqa: E402
from shp_ray.importer.inspect_log import read_log  # noqa: E402
from shp_ray.policy.table import standard_policies  # noqa: E402
from storage.parts import Store  # noqa: E402

POLICIES = standard_policies(random_seeds=(0, 7))
EPOCHS = 2
MAX_ROUNDS = 4
QUESTIONS = {"capital-fr": ("What is the capital of France?", "Paris"), "planet": ("Largest planet?", "Jupiter"),
             "author": ("Who wrote Hamlet?", "Shakespeare")}  # fmt: skip
TEMPLATE = "author"  # its critique is a fixed user turn (no critic model): the rule for a loop without a Critic call


def _writer(messages, tools, tool_choice, config) -> ModelOutput:
    """Drafts that change with the round and the question; right from the second draft on for some."""
    question = messages[0].text
    n = sum(m.role == "assistant" for m in messages) + 1
    qid = next(k for k, (q, _) in QUESTIONS.items() if q == question)
    right = (n + len(messages) + len(qid)) % 3 != 0
    text = f"Draft {n}: {QUESTIONS[qid][1] if right else 'I am not sure'}. " + "Because. " * (n % 3)
    out = ModelOutput.from_content(model="mockllm/model", content=text)
    out.usage = ModelUsage(input_tokens=20 * len(messages), output_tokens=len(text) // 4, total_tokens=0)
    out.choices[0].logprobs = Logprobs(content=[Logprob(token=w, logprob=-0.5 / n) for w in text.split()])
    return out


def _critic(messages, tools, tool_choice, config) -> ModelOutput:
    draft = messages[-1].text
    text = "APPROVED." if "Draft 3" in draft or ("Draft 2" in draft and "sure" not in draft) else "Give a reason."
    out = ModelOutput.from_content(model="mockllm/critic", content=text)
    out.usage = ModelUsage(input_tokens=len(draft) // 3, output_tokens=len(text) // 3, total_tokens=0)
    return out


RECORD: dict[str, list[dict]] = {}


@solver
def writer_critic_loop():
    """Writer -> Critic up to MAX_ROUNDS (the last epoch: or the critic's approval); scored after every draft."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        rounds = RECORD.setdefault(f"{state.sample_id}" + ("" if state.epoch == 1 else f"#e{state.epoch}"), [])
        for t in range(1, MAX_ROUNDS + 1):
            state = await generate(state)
            u = state.output.usage
            verdict = (await score(state))[0]
            lps = [x.logprob for x in state.output.choices[0].logprobs.content]
            rounds.append({"draft": state.output.completion,
                           "tokens": {"writer_prompt": u.input_tokens, "writer_completion": u.output_tokens},
                           "scores": {"includes": 1.0 if verdict.value == "C" else 0.0}, "logprobs": lps})  # fmt: skip
            if t == MAX_ROUNDS:
                break
            if state.sample_id == TEMPLATE:
                feedback = f"Critique {t}: be precise."
            else:
                critique = await get_model(role="critic").generate(state.output.completion)
                feedback, u = critique.completion, critique.usage
                rounds[-1]["tokens"] |= {"critic_prompt": u.input_tokens, "critic_completion": u.output_tokens}
            rounds[-1]["feedback"] = feedback
            if feedback.startswith("APPROVED") and state.epoch == EPOCHS:  # epoch 1 goes on past an approval
                break
            state.messages.append(ChatMessageUser(content=feedback))
        return state

    return solve


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inspect")
    task = Task(dataset=[Sample(input=q, target=a, id=k) for k, (q, a) in QUESTIONS.items()],
                solver=writer_critic_loop(), scorer=includes(), epochs=EPOCHS)  # fmt: skip
    RECORD.clear()
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=_writer), display="none",
                 model_roles={"critic": get_model("mockllm/critic", custom_outputs=_critic)},
                 log_dir=str(folder / "logs"))  # fmt: skip
    assert log.status == "success", log.error
    shutil.copyfile(log.location, folder / "loop.eval")
    write_eval_log(read_eval_log(log.location), str(folder / "loop.json"), format="json")
    ours = [{"id": sid, "question": QUESTIONS[sid.split("#")[0]][0], "answers": [QUESTIONS[sid.split("#")[0]][1]],
             "rounds": rounds} for sid, rounds in RECORD.items()]  # fmt: skip
    (folder / "ours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ours))
    return folder


def _import(path, store, fmt="inspect") -> int:
    return main([str(path), "--store", str(store), "--format", fmt, "--embedder", "fake-hash"])


def _replay(store) -> list[tuple]:
    con = analysis.connect(str(store), policies=POLICIES)
    try:
        cols = ["policy", "scenario_id", "stop_round", "reason", "operational_tokens", "evaluation_tokens"]
        return sorted(tuple(r[c] for c in cols) for r in con.table("replay").to_arrow_table().to_pylist())
    finally:
        con.close()


def _rows(store, table: str, cols: list[str]) -> list[tuple]:
    return sorted(tuple(r.values()) for r in Store(str(store)).read(table, columns=cols).to_pylist())


ROUND_COLS = ["scenario_id", "round", "draft", "feedback", "writer_prompt_tokens", "writer_completion_tokens",
              "critic_prompt_tokens", "critic_completion_tokens"]  # fmt: skip
SCORE_COLS = ["scenario_id", "round", "score", "value"]


def test_an_inspect_log_replays_like_the_same_trajectories_as_jsonl(logs, tmp_path, capsys) -> None:
    ours, evals, jsons = tmp_path / "ours", tmp_path / "eval", tmp_path / "json"
    assert _import(logs / "ours.jsonl", ours, "jsonl") == 0
    assert _import(logs / "loop.eval", evals) == 0 and _import(logs / "loop.json", jsons) == 0
    n = len(QUESTIONS) * EPOCHS
    assert f"imported {n} trajectories" in capsys.readouterr().out
    want = _rows(ours, "rounds", ROUND_COLS)
    assert _rows(evals, "rounds", ROUND_COLS) == want == _rows(jsons, "rounds", ROUND_COLS)
    assert {r[3] for r in want} >= {"APPROVED.", "Give a reason.", "Critique 1: be precise."}  # both critique rules
    assert _rows(evals, "scores", SCORE_COLS) == _rows(ours, "scores", SCORE_COLS)
    sure = _rows(evals, "draft_logprobs", ["scenario_id", "round", "tokens", "mean"])
    assert len(sure) == len(want) and sure == _rows(ours, "draft_logprobs", ["scenario_id", "round", "tokens", "mean"])
    got = _replay(evals)
    assert len(got) == n * len(POLICIES) and got == _replay(ours)
    assert {"critic", "failsafe"} <= {r[3] for r in got}
    epochs = {(r["scenario_id"], r["task_id"], r["epoch"]) for r in Store(str(evals)).read("scenarios").to_pylist()}
    assert ("planet#e2", "planet", 2) in epochs and ("planet", "planet", 1) in epochs


def test_a_second_import_adds_nothing(logs, tmp_path, capsys) -> None:
    store = tmp_path / "store"
    assert _import(logs / "loop.eval", store) == 0
    parts = sorted(store.rglob("*.parquet"))
    assert _import(logs / "loop.eval", store) == 0
    assert "nothing added" in capsys.readouterr().out and sorted(store.rglob("*.parquet")) == parts


def test_the_export_opens_with_inspect_ai_and_imports_back_the_same(logs, tmp_path, capsys) -> None:
    store = tmp_path / "store"
    assert _import(logs / "loop.eval", store) == 0
    out = tmp_path / "all.eval"
    assert export_main([str(store), str(out)]) == 0
    log = read_eval_log(str(out))
    rounds = {(r[0], r[1]) for r in _rows(store, "rounds", ["scenario_id", "round"])}
    assert log.status == "success" and len(log.samples) == len(QUESTIONS) * EPOCHS
    scores = _rows(store, "scores", SCORE_COLS)
    tokens = _rows(store, "rounds", ["scenario_id", *ROUND_COLS[4:]])
    for s in log.samples:
        sid = f"{s.id}" + ("" if s.epoch == 1 else f"#e{s.epoch}")
        assert sum(m.role == "assistant" for m in s.messages) == sum(r[0] == sid for r in rounds)
        assert set(s.scores) == {"includes"}
        # every stored score of the trajectory, as inspect_ai reads them: one intermediate score event each
        got = sorted((e.scorer, e.score.value) for e in s.events if e.event == "score" and e.intermediate)
        assert got == sorted((r[2], r[3]) for r in scores if r[0] == sid)
        mine = [r[1:] for r in tokens if r[0] == sid]  # and its usage: the stored tokens' sums
        usage = s.model_usage["imported"]
        assert (usage.input_tokens, usage.output_tokens) == (
            sum(r[0] + r[2] for r in mine),
            sum(r[1] + r[3] for r in mine),
        )
    again = tmp_path / "again"
    assert _import(out, again) == 0  # our export is a log like any other: the same rounds, tokens and scores
    assert _rows(again, "rounds", ROUND_COLS) == _rows(store, "rounds", ROUND_COLS)
    assert _rows(again, "scores", SCORE_COLS) == _rows(store, "scores", SCORE_COLS)

    cut = tmp_path / "shp.eval"
    assert export_main([str(store), str(cut), "--policy", "fixed_k1"]) == 0
    assert "each up to fixed_k1's stop" in capsys.readouterr().out
    log = read_eval_log(str(cut))
    assert len(log.samples) == len(QUESTIONS) * EPOCHS
    assert all(sum(m.role == "assistant" for m in s.messages) == 1 for s in log.samples)
    assert all(s.metadata["stop_round"] == 1 and s.metadata["policy"] == "fixed_k1" for s in log.samples)


def _members(path) -> tuple[dict, dict[str, dict]]:
    log = read_log(str(path), path.read_bytes())
    return log.header, {s.where.split(":", 1)[1]: dict(s.data) for s in log.samples}


def _write(path, header: dict, samples: dict[str, dict]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in samples.items():
            z.writestr(name, json.dumps(data))
        z.writestr("header.json", json.dumps(header))


def _unknown_role(sample: dict) -> tuple[str, str]:
    sample["messages"][1]["role"] = "narrator"
    return "messages[1].role", "unknown message role 'narrator' (known: system, user, assistant, tool)"


def _no_text(sample: dict) -> tuple[str, str]:
    i, event = next((i, e) for i, e in enumerate(sample["events"]) if e["event"] == "model")
    event["output"]["choices"][0]["message"]["content"] = [{"type": "reasoning", "reasoning": "hmm"}]
    return f"events[{i}].output", "a writer turn with no text"


def _bad_usage(sample: dict) -> tuple[str, str]:
    i, event = next((i, e) for i, e in enumerate(sample["events"]) if e["event"] == "model")
    event["output"]["usage"]["output_tokens"] = -3
    return f"events[{i}].output.usage.output_tokens: ", "must be an integer >= 0, got -3"


@pytest.mark.parametrize("change", [_unknown_role, _no_text, _bad_usage])
def test_a_bad_sample_is_one_line_naming_file_member_and_field(logs, tmp_path, capsys, change) -> None:
    header, samples = _members(logs / "loop.eval")
    member = sorted(samples)[1]
    path, says = change(samples[member])
    bad = tmp_path / "bad.eval"
    _write(bad, header, samples)
    store = tmp_path / "store"
    assert _import(bad, store) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"shp-import: {bad}:{member}:{path}") and says in err, err
    assert err.count("\n") == 1 and not store.exists()


def test_a_truncated_log_and_a_bad_export_say_so(logs, tmp_path, capsys) -> None:
    data = (logs / "loop.eval").read_bytes()
    cut = tmp_path / "cut.eval"
    cut.write_bytes(data[: len(data) // 2])
    store = tmp_path / "store"
    assert _import(cut, store) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"shp-import: {cut}: not a complete .eval log") and err.count("\n") == 1, err
    assert not store.exists()
    assert export_main([str(store), str(tmp_path / "x.eval")]) == 2
    assert capsys.readouterr().err.startswith(f"shp-export: no store at {store}")
    assert export_main([str(store), str(tmp_path / "no" / "x.eval")]) == 2
    assert (
        capsys.readouterr().err
        == f"shp-export: {tmp_path / 'no' / 'x.eval'}: the folder {tmp_path / 'no'} does not exist\n"
    )
    assert not list(tmp_path.glob("*x.eval*"))


def test_a_log_without_events_is_rebuilt_from_its_conversation(logs, tmp_path) -> None:
    """Events left out (read_eval_log(exclude_fields=...), an older log): the assistant turns are the drafts, the
    user turns after each its critique, no tokens."""
    doc = json.loads((logs / "loop.json").read_text())
    for s in doc["samples"]:
        s["events"] = []
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(doc))
    full, store = tmp_path / "full", tmp_path / "store"
    assert _import(logs / "loop.json", full) == 0 and _import(bare, store) == 0
    got, want = _rows(store, "rounds", ROUND_COLS), _rows(full, "rounds", ROUND_COLS)
    last = {}
    for r in want:
        last[r[0]] = max(last.get(r[0], 0), r[1])
    assert [r[:3] for r in got] == [r[:3] for r in want]  # the same drafts, round by round
    assert [r[3] for r in got if r[1] < last[r[0]]] == [r[3] for r in want if r[1] < last[r[0]]]
    assert {r[4:] for r in got} == {(0, 0, 0, 0)}


CRITIC_SYSTEM = "You are the critic of this answer."


def _self_refine_model(messages, tools, tool_choice, config) -> ModelOutput:
    """One model for both parts: asked with the critic's system message it critiques, else it drafts."""
    if messages[0].role == "system":
        text = "APPROVED." if "Draft 2" in messages[-1].text else f"Say more than {len(messages[-1].text)} characters."
    else:
        text = f"Draft {sum(m.role == 'user' for m in messages)}: {messages[0].text[:12]}. " + "More. " * len(messages)
    out = ModelOutput.from_content(model="mockllm/model", content=text)
    out.usage = ModelUsage(input_tokens=7 * len(messages), output_tokens=len(text) // 4, total_tokens=0)
    return out


@solver
def self_refine_loop():
    """The critique comes from the same model and becomes a turn of the conversation (an assistant message), so the
    default rule reads every call as the Writer's; only the critic's system message tells them apart."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        rounds = RECORD.setdefault(str(state.sample_id), [])
        for t in range(1, 4):
            state = await generate(state)
            u = state.output.usage
            tokens = {"writer_prompt": u.input_tokens, "writer_completion": u.output_tokens}
            rounds.append({"draft": state.output.completion, "tokens": tokens})
            if t == 3:
                break
            asked = [ChatMessageSystem(content=CRITIC_SYSTEM), ChatMessageUser(content=state.output.completion)]
            critique = await get_model().generate(asked)
            u = critique.usage
            rounds[-1] |= {"feedback": critique.completion}
            rounds[-1]["tokens"] |= {"critic_prompt": u.input_tokens, "critic_completion": u.output_tokens}
            state.messages += [critique.message, ChatMessageUser(content="Revise your answer.")]
        return state

    return solve


def test_inspect_role_names_the_critic_when_its_reply_is_a_turn_of_the_conversation(tmp_path, capsys) -> None:
    RECORD.clear()
    task = Task(dataset=[Sample(input=q, target=a, id=f"refine-{k}") for k, (q, a) in QUESTIONS.items()],
                solver=self_refine_loop())  # fmt: skip
    [log] = eval(task, model=get_model("mockllm/model", custom_outputs=_self_refine_model), display="none",
                 log_dir=str(tmp_path / "logs"))  # fmt: skip
    assert log.status == "success", log.error
    ours = tmp_path / "ours.jsonl"
    rows = [
        {
            "id": sid,
            "question": QUESTIONS[sid.removeprefix("refine-")][0],
            "answers": [QUESTIONS[sid.removeprefix("refine-")][1]],
            "rounds": rounds,
        }
        for sid, rounds in RECORD.items()
    ]
    ours.write_text("".join(json.dumps(r) + "\n" for r in rows))
    want, store = tmp_path / "want", tmp_path / "store"
    assert _import(ours, want, "jsonl") == 0
    assert _import(log.location, store) == 0  # the default: every call's reply is a turn, so every call drafts
    drafts = {r[0]: r[1] for r in _rows(store, "rounds", ["scenario_id", "round"])}
    assert set(drafts.values()) == {5}
    rule = ["--inspect-role", "critic=message:(?i)you are the critic"]
    ruled = tmp_path / "ruled"
    for into in (ruled, store):
        assert main([log.location, "--store", str(into), "--format", "inspect", "--embedder", "fake-hash", *rule]) == 0
    assert _rows(ruled, "rounds", ROUND_COLS) == _rows(want, "rounds", ROUND_COLS)
    assert _replay(ruled) == _replay(want)
    assert len(Store(str(store)).read("generations")) == 2  # another reading of the same log: another generation
    capsys.readouterr()
    for bad, says in ((["--inspect-role", "critic=agent:x"], "FIELD in ('role', 'model', 'message')"),
                      (["--inspect-role", "critic=role:("], "not a regular expression")):  # fmt: skip
        assert main([log.location, "--store", str(tmp_path / "bad"), "--format", "inspect", *bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"shp-import: --inspect-role {bad[1]!r}: ") and says in err, err
        assert err.count("\n") == 1 and not (tmp_path / "bad").exists()
    with pytest.raises(SystemExit, match="2"):
        main([log.location, "--store", str(tmp_path / "bad"), "--format", "otlp", *rule])
    assert "--inspect-role applies to --format inspect only" in capsys.readouterr().err


def test_the_import_needs_no_inspect_ai(logs, tmp_path) -> None:
    """The log is read directly: an interpreter where inspect_ai cannot be imported imports it all the same."""
    code = (
        "import sys; sys.modules['inspect_ai'] = None\n"  # any import of inspect_ai now fails
        "from shp_ray.importer.cli import main\n"
        f"sys.exit(main([{str(logs / 'loop.eval')!r}, '--store', {str(tmp_path / 'store')!r}, '--format', 'inspect',"
        " '--embedder', 'fake-hash']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"imported {len(QUESTIONS) * EPOCHS} trajectories" in done.stdout
