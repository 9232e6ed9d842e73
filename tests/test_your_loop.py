"""Bring your own loop, end to end: the docs' tasks file (its own column names) and prompt preset (in a
``--config-dir``) swept by ``shp-sweep`` against the simulated OpenAI-compatible server over real HTTP,
with real Ray, the real embedding model and the Parquet store; the server's log of what it received is
compared with the rendered templates. A malformed tasks file fails before any call."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow.compute as pc
import pytest
import yaml
from hydra import compose, initialize_config_module

import conf.schema  # noqa: F401
from conf.errors import ConfigError
from conf.resolve import to_job
from shp_ray.generation.datasets import DatasetError
from shp_ray.generation.prompts import critic_messages, from_mapping, writer_messages
from shp_ray.generation.tasks_file import FieldMap, TasksFile, load_tasks
from shp_ray.providers.sim.server import SimServer
from storage import Store
from sweeps import job as sweep_job

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "your-loop"
TASKS = EXAMPLE / "tasks.jsonl"
FIELDS = FieldMap(id="qid", question="prompt_text", contexts="passages", answers="gold")
TASK_IDS = {json.loads(line)["qid"] for line in TASKS.read_text().splitlines() if line.strip()}
MAX_ROUNDS = 3


OVERRIDES = [
    "provider=sim", "dataset=file", "dataset.fields.id=qid", "dataset.fields.question=prompt_text",
    "dataset.fields.contexts=passages", "dataset.fields.answers=gold", "dataset.split=null", "prompts=my-loop",
    f"generation.max_rounds={MAX_ROUNDS}", "report.enabled=false",
]  # fmt: skip


def sweep(url: str, tasks: Path, store: Path, *extra: str) -> subprocess.CompletedProcess:
    """The command of docs/your-loop.md, pointed at a running simulated server."""
    args = [
        "--config-dir", str(EXAMPLE / "conf"), *OVERRIDES, f"provider.base_url={url}", f"dataset.path={tasks}",
        f"store.path={store}", *extra,
    ]  # fmt: skip
    return subprocess.run(
        [str(Path(sys.executable).parent / "shp-sweep"), *args],
        capture_output=True, text=True, timeout=600, cwd=store.parent,
        env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip


def as_tuples(messages) -> tuple[tuple[str, str], ...]:
    return tuple((role, content) for role, content in messages)


def test_a_users_tasks_and_prompts_reach_the_server_as_rendered_templates(tmp_path, ray_address):
    store = tmp_path / "store"
    prompts = from_mapping(yaml.safe_load((EXAMPLE / "conf" / "prompts" / "my-loop.yaml").read_text()))
    tasks = {s.scenario_id: s for s in load_tasks(TasksFile(str(TASKS), FIELDS), ("topic",)).scenarios}
    with SimServer(keep_requests=10_000, approve_rate=1.0) as sim:  # its Critic approves every question from some round
        done = sweep(sim.base_url, TASKS, store, f"ray.address={ray_address}")  # how Ray starts: not the subject
        assert done.returncode == 0, done.stdout + done.stderr
        received = {as_tuples(m) for m in sim.received if any(r == "system" for r, _ in m)}  # not the preflight
        assert "job " in done.stdout and "10/10 trajectories, 10 generated now" in done.stdout

        # Every Writer and Critic request the server received is a template of my-loop.yaml rendered with a
        # task's fields (its metadata column {topic} included), and every round of every task was asked.
        rounds = Store(store).read("rounds", columns=["scenario_id", "round", "draft", "feedback"]).to_pylist()
        assert len(rounds) == 10 * MAX_ROUNDS
        by_key = {(r["scenario_id"], r["round"]): r for r in rounds}
        expected = set()
        for (sid, t), r in by_key.items():
            s = tasks[sid]
            prev = by_key.get((sid, t - 1), {"draft": "", "feedback": ""})
            expected.add(writer_messages(s.question, s.contexts, t, prev["draft"], prev["feedback"], prompts, s.meta))
            if t < MAX_ROUNDS:  # the last round's draft is not critiqued
                expected.add(critic_messages(s.question, s.contexts, t, r["draft"], prompts, s.meta))
        assert received == expected
        moon = tasks["moon"]
        first = writer_messages(moon.question, moon.contexts, 1, "", "", prompts, moon.meta)
        assert first in received and first[0] == (
            "system", "You are the Writer, a careful history tutor. Answer from the numbered passages only, in at most "
            "two sentences, and end with a line 'Answer: <the short answer>'.",
        )  # {topic} of that task, rendered  # fmt: skip

        # The preset's approval marker is what the stored signal reads: the simulated Critic says APPROVED,
        # which my-loop.yaml (approval: LGTM) does not take for an approval.
        said_approved = [r["feedback"] for r in rounds if (r["feedback"] or "").startswith("APPROVED")]
        assert said_approved, "the simulated Critic approves some of these questions at round 2"
        signals = Store(store).read("signals", columns=["approved"])
        assert not any(signals["approved"].to_pylist())
        gens = Store(store).read("generations", columns=["prompt_version"])
        assert gens["prompt_version"].to_pylist() == ["my-loop"]

        # The same file resumes: nothing generated, nothing asked.
        before = sim.stats["requests"]
        again = sweep(sim.base_url, TASKS, store)
        assert again.returncode == 0 and "0 generated now (0 paid calls)" in again.stdout, again.stderr
        assert sim.stats["requests"] == before

    # An edited file is a new generation (its content hash is in gen_id); the same file is the stored one.
    edited = tmp_path / "edited.jsonl"
    edited.write_text(TASKS.read_text().replace("Who wrote Hamlet?", "Who wrote the play Hamlet?"))
    stored = set(Store(store).read("rounds", columns=["gen_id"])["gen_id"].to_pylist())
    assert {gen_id_of(TASKS)} == stored and gen_id_of(edited) not in stored
    assert pc.max(Store(store).read("results")["stop_round"]).as_py() <= MAX_ROUNDS


def job_of(tasks: Path, *extra: str):
    """The job of the same command, composed in-process (``--config-dir`` is Hydra's search path)."""
    search = f"hydra.searchpath=[file://{EXAMPLE / 'conf'}]"
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[search, *OVERRIDES, f"dataset.path={tasks}", *extra])
    return to_job(cfg)


def gen_id_of(tasks: Path) -> str:
    job, _ = sweep_job.with_tasks(job_of(tasks))
    return job.generation.gen_id(job.provider.kind, job.provider.model)


def test_a_bad_tasks_file_fails_with_file_line_before_any_call(tmp_path):
    path, store = tmp_path / "tasks.jsonl", tmp_path / "store"
    lines = TASKS.read_text().splitlines()
    lines[3] = '{"qid": "moon", "prompt_text": "Who was'
    path.write_text("\n".join(lines) + "\n")
    with SimServer() as sim:
        done = sweep(sim.base_url, path, store)
        assert sim.stats["requests"] == 0  # not even the preflight call
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert f"shp-sweep: invalid tasks: {path}:4: not valid JSON" in done.stderr, out
    assert "Traceback" not in out
    assert not store.exists()  # nothing generated, no manifest row: not even the store folder


@pytest.mark.parametrize(
    "line, broken, said",
    [
        (6, '{"qid": "cap-fr", "prompt_text": "Again?", "passages": [], "gold": "x", "topic": "t"}',
         "{path}:6: field 'qid': duplicate id 'cap-fr' (first at line 1)"),
        (7, '{"qid": "hamlet", "prompt_text": 1600, "passages": [], "gold": "x", "topic": "t"}',
         "{path}:7: field 'prompt_text' should be a non-empty string, got int"),
        (2, '{"qid": "cap-jp", "prompt_text": "Capital?", "passages": [], "gold": "x"}',
         "{path}:2: field 'topic' is missing (a prompt template uses {{topic}})"),
    ],
)  # fmt: skip
def test_the_job_refuses_a_bad_tasks_file_before_it_writes(tmp_path, line, broken, said):
    path, store = tmp_path / "tasks.jsonl", tmp_path / "store"
    lines = TASKS.read_text().splitlines()
    lines[line - 1] = broken
    path.write_text("\n".join(lines) + "\n")
    job = replace(job_of(path, "provider.base_url=http://127.0.0.1:9/v1"), store=Store(store))
    with pytest.raises(DatasetError) as err:
        sweep_job.run(job, output_dir=tmp_path / "out", job_tag="t", config_snapshot={}, command="t")
    assert str(err.value) == said.format(path=path)
    assert not store.exists()


def test_a_placeholder_naming_no_column_fails_before_the_job_writes(tmp_path):
    store = tmp_path / "store"
    job = job_of(TASKS, "prompts.critic.user='Round: {round} {draft} ({difficulty})'")
    with pytest.raises(DatasetError, match=r"a prompt template uses \{difficulty\}, which names no metadata column"):
        sweep_job.run(
            replace(job, store=Store(store)), output_dir=tmp_path, job_tag="t", config_snapshot={}, command="t"
        )
    assert not store.exists()


def test_a_users_own_conf_folder_on_the_path_and_a_scorer_by_file_path(tmp_path, ray_address):
    """The docs' layout as a user has it: their project folder on PYTHONPATH holds a ``conf/`` of their own (the
    prompt preset), which must not hide the project's config, and the scorer is named by its file path, in a
    folder that is on no path at all."""
    project = tmp_path / "my-project"
    shutil.copytree(EXAMPLE / "conf", project / "conf")
    (project / "scorers").mkdir()
    shutil.copy(EXAMPLE / "loop_scorer.py", project / "scorers" / "loop_scorer.py")
    shutil.copy(TASKS, project / "tasks.jsonl")
    store = tmp_path / "store"
    with SimServer(approve_rate=1.0) as sim:
        args = [
            "--config-dir", "conf", *OVERRIDES, f"provider.base_url={sim.base_url}", "dataset.path=tasks.jsonl",
            f"store.path={store}", f"ray.address={ray_address}", "generation.embedder=fake-hash",
            "score=python", "score.target=scorers/loop_scorer.py:score",
        ]  # fmt: skip
        done = subprocess.run(
            [str(Path(sys.executable).parent / "shp-sweep"), *args], capture_output=True, text=True, timeout=600,
            cwd=project, env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(project)},
        )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "10/10 trajectories, 10 generated now" in done.stdout and "Primary config module" not in out
    assert "did you mean" not in out
    # Every stored draft was scored by the file's own function, in the Ray workers: the simulator's drafts carry
    # no "Answer:" line, so the example scorer raises its own ValueError on each, recorded per round.
    scores = Store(store).read("scores", columns=["scenario_id", "round", "scorer", "value", "error"]).to_pylist()
    scorer = str((project / "scorers" / "loop_scorer.py").resolve())
    assert {r["scorer"] for r in scores} == {f"python:{scorer}:score"}
    assert {(r["scenario_id"], r["round"]) for r in scores} == {(s, t) for s in TASK_IDS for t in range(1, 4)}
    assert {r["error"] for r in scores} == {"ValueError: the draft has no 'Answer:' line"}


def test_a_scorer_file_that_is_missing_or_broken_is_one_line_naming_the_key(tmp_path):
    from shp_ray.generation.score_config import ScoreConfigError, load_target

    broken = tmp_path / "broken.py"
    broken.write_text("def score(task, draft):\n    return {}\nraise RuntimeError('no')\n")
    with pytest.raises(ScoreConfigError, match=r"^score.target: .*cannot load .*broken.py' \(RuntimeError: no\)$"):
        load_target(f"{broken}:score")
    with pytest.raises(ScoreConfigError, match=r"^score.target: .*: no file .*absent.py'$"):
        load_target(f"{tmp_path / 'absent.py'}:score")
    fine = tmp_path / "fine.py"
    fine.write_text("def score(task, draft):\n    return {'n': 1.0}\n")
    with pytest.raises(ScoreConfigError, match=r"has no 'scor'"):
        load_target(f"{fine}:scor")
    assert load_target(f"{fine}:score")(None, "x") == {"n": 1.0}


def test_a_prompt_preset_by_its_file_path_and_a_split_map(tmp_path):
    """prompts.file=PATH reads the preset from the file (no --config-dir); dataset.split_map is checked when the
    config resolves. Composed without the example's config folder: the file alone is the preset."""
    with initialize_config_module(config_module="conf", version_base="1.3"):
        preset = EXAMPLE / "conf" / "prompts" / "my-loop.yaml"
        base = [o for o in OVERRIDES if not o.startswith("prompts=")] + [f"dataset.path={TASKS}"]
        job = to_job(compose(config_name="config", overrides=[*base, f"prompts.file={preset}"]))
        assert job.generation.prompts == from_mapping(yaml.safe_load(preset.read_text()))
        for extra, said in [
            ([f"prompts.file={tmp_path / 'none.yaml'}"], "prompts.file: cannot read "),
            (["dataset.split_map={train: dev}"], "dataset.split_map: needs dataset.fields.split"),
            (["dataset.fields.split=part", "dataset.split_map=dev"], "dataset.split_map: should be a mapping"),
            (["dataset.fields.split=part", "dataset.split_map={train: validation}"],
             "dataset.split_map: 'train' maps to 'validation'; each name maps to one of ['dev', 'test']"),
        ]:  # fmt: skip
            with pytest.raises(ConfigError, match="^" + re.escape(said)):
                to_job(compose(config_name="config", overrides=[*base, *extra]))
        bad = tmp_path / "bad.yaml"
        bad.write_text("name: x\nwriter: [unclosed\n")
        with pytest.raises(ConfigError, match=rf"^prompts.file: {re.escape(str(bad))}:\d+: not valid YAML"):
            to_job(compose(config_name="config", overrides=[*base, f"prompts.file={bad}"]))
