"""Every config key flows to where it acts: one case per leaf key of the schema.

The keys are read from conf/schema.py, so a key added there without a case in FLOWS fails
here. Each case sets the key to a valid non-default value and names the field of the typed job
(or of the object built from it: ProviderSpec, server options, GenerationConfig, HaltConfig, the
policies, ...) that must change to exactly that value. Past the job: the server options reach
the server the job starts, the Ray and progress settings reach ``generate``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hydra import compose

from conf.resolve import to_job
from conf.spec import JobSpec, ReportSpec, WeightsSpec
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.datasets import load_scenarios
from shp_ray.policy.cascade import HaltConfig
from shp_ray.providers.llama import LLAMA_SPEC, LlamaOptions
from shp_ray.providers.sim.options import SimOptions
from sweeps import job as sweep_job
from tests import test_conf
from tests.test_conf import schema_keys

hydra_ctx = test_conf.hydra_ctx  # the compose fixture, shared with test_conf

# A consistent AHP matrix (every metric equally important).
UNIFORM_AHP = "[[1.0,1.0,1.0,1.0],[1.0,1.0,1.0,1.0],[1.0,1.0,1.0,1.0],[1.0,1.0,1.0,1.0]]"


@dataclass(frozen=True)
class Flow:
    """Setting ``overrides`` on top of ``base`` makes ``where(job)`` equal ``expected`` (and not before)."""

    overrides: tuple[str, ...]
    where: Callable[[JobSpec], Any]
    expected: Any
    base: tuple[str, ...] = ()


def flow(*overrides: str, where: Callable[[JobSpec], Any], expected: Any, base: tuple[str, ...] = ()) -> Flow:
    return Flow(overrides, where, expected, base)


def policy(job: JobSpec, name: str):
    return next(p for p in job.policies if p.name == name)


SIM = ("provider=sim",)
TASKS = ("dataset=file", "dataset.path=a.jsonl")

FLOWS: dict[str, Flow] = {
    # provider: the ProviderSpec every call is made with, and the local server's options
    "provider.kind": flow(
        "provider.kind=sim", where=lambda j: (j.provider.kind, type(j.provider_options)), expected=("sim", SimOptions)
    ),
    "provider.base_url": flow(
        "provider.base_url=http://127.0.0.1:9/v1", where=lambda j: j.provider.base_url, expected="http://127.0.0.1:9/v1"
    ),
    "provider.model": flow("provider.model=m2", where=lambda j: j.provider.model, expected="m2"),
    "provider.api_key_env": flow(
        "provider.api_key_env=MY_KEY", where=lambda j: j.provider.api_key_env, expected="MY_KEY"
    ),
    "provider.rpm": flow("provider.rpm=60", where=lambda j: j.provider.rpm, expected=60.0),
    "provider.tpm": flow("provider.tpm=9000", where=lambda j: j.provider.tpm, expected=9000.0),
    "provider.rate_window_s": flow("provider.rate_window_s=5", where=lambda j: j.provider.rate_window_s, expected=5.0),
    "provider.max_concurrency": flow(
        "provider.max_concurrency=5", where=lambda j: j.provider.max_concurrency, expected=5
    ),
    "provider.max_retries": flow("provider.max_retries=3", where=lambda j: j.provider.max_retries, expected=3),
    "provider.timeout_s": flow("provider.timeout_s=9.5", where=lambda j: j.provider.timeout_s, expected=9.5),
    "provider.batch": flow("provider.batch=true", where=lambda j: j.provider.batch, expected=True, base=SIM),
    "provider.hedge": flow("provider.hedge=true", where=lambda j: j.provider.hedge, expected=True, base=SIM),
    "provider.batch_poll_s": flow("provider.batch_poll_s=2.5", where=lambda j: j.provider.batch_poll_s, expected=2.5),
    "provider.batch_max_tries": flow(
        "provider.batch_max_tries=4", where=lambda j: j.provider.batch_max_tries, expected=4
    ),
    "provider.prompt_cache": flow(
        "provider.prompt_cache=false", where=lambda j: j.provider_options.prompt_cache, expected=False
    ),
    "provider.n_threads": flow("provider.n_threads=2", where=lambda j: j.provider_options.n_threads, expected=2),
    "provider.n_ctx": flow("provider.n_ctx=2048", where=lambda j: j.provider_options.n_ctx, expected=2048),
    "provider.parallel": flow("provider.parallel=4", where=lambda j: j.provider_options.parallel, expected=4),
    "provider.sim_rpm": flow("provider.sim_rpm=120", where=lambda j: j.provider_options.rpm, expected=120.0, base=SIM),
    "provider.sim_fault_rate": flow(
        "provider.sim_fault_rate=0.1", where=lambda j: j.provider_options.fault_rate, expected=0.1, base=SIM
    ),
    "provider.sim_latency_s": flow(
        "provider.sim_latency_s=0.5", where=lambda j: j.provider_options.latency_s, expected=0.5, base=SIM
    ),
    "provider.sim_seed": flow("provider.sim_seed=7", where=lambda j: j.provider_options.seed, expected=7, base=SIM),
    # dataset: the scenarios the job loads
    "dataset.name": flow("dataset.name=asqa", where=lambda j: j.dataset, expected="asqa"),
    "dataset.split": flow("dataset.split=dev", where=lambda j: j.split, expected="dev"),
    "dataset.limit": flow("dataset.limit=5", where=lambda j: j.limit, expected=5),
    # dataset=file: the tasks file the job reads, and its column names
    "dataset.path": flow("dataset.path=b.csv", base=TASKS, where=lambda j: j.tasks and j.tasks.path, expected="b.csv"),
    **{
        f"dataset.fields.{name}": flow(
            f"dataset.fields.{name}=col_{name}",
            base=TASKS,
            where=lambda j, name=name: getattr(j.tasks.fields, name),
            expected=f"col_{name}",
        )
        for name in ("id", "question", "contexts", "answers", "split")
    },
    "dataset.split_map": flow(
        "dataset.split_map={train: dev, eval: test}",
        base=(*TASKS, "dataset.fields.split=part"),
        where=lambda j: j.tasks and j.tasks.split_map,
        expected=(("eval", "test"), ("train", "dev")),
    ),
    # judge: GenerationConfig.judge / judge_model
    "judge.kind": flow("judge.kind=llm", where=lambda j: j.generation.judge, expected="llm"),
    "judge.model": flow("judge.model=big", where=lambda j: j.generation.judge_model, expected="big"),
    "judge.batch": flow(
        "judge.kind=llm", "judge.batch=true", where=lambda j: j.generation.judge_batch, expected=True, base=SIM
    ),
    # score: the scorer GenerationConfig.scores runs on every stored draft
    "score.kind": flow("score.kind=hotpot", where=lambda j: [s.kind for s in j.generation.scores], expected=["hotpot"]),
    "score.name": flow(
        "score.name=right", where=lambda j: j.generation.scores[0].name, expected="right", base=("score=exact",)
    ),
    "score.pattern": flow(
        "score.pattern='is (?P<answer>.+)'",
        where=lambda j: j.generation.scores[0].pattern,
        expected="is (?P<answer>.+)",
        base=("score=regex", "score.pattern='(?P<answer>.+)'"),
    ),
    "score.target": flow(
        "score.target=shp_ray.policy.scorers:contains",
        where=lambda j: j.generation.scores[0].target,
        expected="shp_ray.policy.scorers:contains",
        base=("score=python", "score.target=shp_ray.policy.scorers:hotpot"),
    ),
    "score.timeout_s": flow(
        "score.timeout_s=2.5",
        where=lambda j: j.generation.scores[0].timeout_s,
        expected=2.5,
        base=("score=python", "score.target=shp_ray.policy.scorers:hotpot"),
    ),
    # answer: what reads each stored draft's answer (GenerationConfig.answer)
    "answer.kind": flow("answer.kind=qa", where=lambda j: j.generation.answer.kind, expected="qa"),
    "answer.target": flow(
        "answer.target=shp_ray.generation.answer_config:code_answer",
        where=lambda j: j.generation.answer.target,
        expected="shp_ray.generation.answer_config:code_answer",
        base=("answer.kind=python", "answer.target=shp_ray.policy.scorers:hotpot"),
    ),
    "answer.timeout_s": flow(
        "answer.timeout_s=2.5",
        where=lambda j: j.generation.answer.timeout_s,
        expected=2.5,
        base=("answer.kind=python", "answer.target=shp_ray.policy.scorers:hotpot"),
    ),
    # logprobs: whether the Writer asks for token log-probabilities (GenerationConfig.logprobs -> its ChatRequest)
    "logprobs.request": flow("logprobs.request=true", where=lambda j: j.generation.logprobs.request, expected=True),
    "logprobs.last_k": flow("logprobs.last_k=8", where=lambda j: j.generation.logprobs.last_k, expected=8),
    # generation: GenerationConfig
    "generation.max_rounds": flow(
        "generation.max_rounds=4",
        where=lambda j: (j.generation.max_rounds, j.halt.max_rounds),  # the cascade's cap follows
        expected=(4, 4),
    ),
    "generation.temperature": flow(
        "generation.temperature=0.7", where=lambda j: j.generation.temperature, expected=0.7
    ),
    "generation.seed": flow("generation.seed=3", where=lambda j: j.generation.seed, expected=3),
    # prompts: the preset the Writer and the Critic are asked with (GenerationConfig.prompts)
    "prompts.name": flow("prompts.name=mine", where=lambda j: j.generation.prompt_version, expected="mine"),
    **{
        f"prompts.{key}": flow(
            f"prompts.{key}='{text}'", where=lambda j, attr=attr: getattr(j.generation.prompts, attr), expected=text
        )
        for key, attr, text in (
            ("writer.system", "writer_system", "You are the Writer."),
            ("writer.user", "writer_user", "Round: {round} {question}"),
            ("writer.revise", "revise", "{feedback} {draft}"),
            ("critic.system", "critic_system", "You are the Critic."),
            ("critic.user", "critic_user", "{draft}"),
        )
    },
    "prompts.approval": flow("prompts.approval=LGTM", where=lambda j: j.generation.prompts.approval, expected="LGTM"),
    "prompts.file": flow(  # a preset read from its file: the shipped v1's, by path, over the default v3
        f"prompts.file={Path(str(resources.files('shp_ray'))) / 'data' / 'prompts' / 'shp-wc-v1.yaml'}",
        where=lambda j: j.generation.prompt_version,
        expected="shp-wc-v1",
    ),
    "generation.max_tokens": flow("generation.max_tokens=128", where=lambda j: j.generation.max_tokens, expected=128),
    "generation.embedder": flow(
        "generation.embedder=fake-hash", where=lambda j: j.generation.embedder, expected="fake-hash"
    ),
    "generation.workers": flow("generation.workers=1", where=lambda j: j.generation.workers, expected=1),
    "generation.concurrency": flow("generation.concurrency=4", where=lambda j: j.generation.concurrency, expected=4),
    "generation.critic": flow(  # the code loop's Critic: the visible-test report, or the LLM with it in hand
        "generation.critic=llm_tests",
        where=lambda j: (j.generation.critic, j.generation.gen_id_parts("sim", "m")["critic"]),
        expected=("llm_tests", "llm_tests"),
        base=("dataset=humaneval",),
    ),
    "generation.epochs": flow(  # N trajectories per task: the job's scenarios; never gen_id
        "generation.epochs=3",
        where=lambda j: (j.generation.epochs, "epochs" in j.generation.gen_id_parts("sim", "m")),
        expected=(3, False),
        base=("generation.temperature=0.7",),
    ),
    "generation.seeding": flow(  # one seed for every call: the sampled Writer's seed and the Critic's temperature
        "generation.seeding=run",
        where=lambda j: (j.generation.seeding, j.generation.writer_seed("t", 2, 3), j.generation.critic_temperature),
        expected=("run", 0, 0.7),
        base=("generation.temperature=0.7",),
    ),
    "dataset.tests": flow(  # the public/private split of HumanEval's check: the generation's tests, in gen_id
        "dataset.tests=split",
        where=lambda j: (j.generation.tests, j.generation.gen_id_parts("sim", "m").get("tests")),
        expected=("split", "split"),
        base=("dataset=humaneval",),
    ),
    # halting: the base HaltConfig, and through it every cascade policy replayed
    "halting.eps": flow(
        "halting.eps=0.03", where=lambda j: (j.halt.eps, policy(j, "shp").halt.eps), expected=(0.03, 0.03)
    ),
    "halting.k": flow("halting.k=3", where=lambda j: (j.halt.k, policy(j, "shp").halt.k), expected=(3, 3)),
    "halting.warmup": flow(
        "halting.warmup=3", where=lambda j: (j.halt.warmup, policy(j, "shp").halt.warmup), expected=(3, 3)
    ),
    "halting.max_rounds": flow(
        "halting.max_rounds=4", where=lambda j: (j.halt.max_rounds, policy(j, "shp").halt.max_rounds), expected=(4, 4)
    ),
    "halting.min_gain": flow(
        "halting.min_gain=0.01",
        where=lambda j: (j.halt.min_gain, policy(j, "shp").halt.min_gain),
        expected=(0.01, 0.01),
    ),
    # weights: WeightsSpec, read by the job after generation
    "weights.strategy": flow("weights.strategy=entropy", where=lambda j: j.weights.strategy, expected="entropy"),
    "weights.pairwise": flow(
        "weights.strategy=ahp",
        f"weights.pairwise={UNIFORM_AHP}",
        where=lambda j: j.weights.pairwise,
        expected=((1.0,) * 4,) * 4,
    ),
    "weights.force": flow(
        "weights.force=true",
        where=lambda j: j.weights.force,
        expected=True,
        base=("weights.strategy=ahp", f"weights.pairwise={UNIFORM_AHP}"),
    ),
    # replay: the policies replayed
    "replay.policies": flow(
        "replay.policies=[abl_no_gain]", where=lambda j: [p.name for p in j.policies], expected=["abl_no_gain"]
    ),
    "replay.random_seeds": flow(
        "replay.random_seeds=[3]", where=lambda j: {p.seed for p in j.policies if p.kind == "random"}, expected={3}
    ),
    # report: ReportSpec
    "report.enabled": flow("report.enabled=false", where=lambda j: j.report.enabled, expected=False),
    "report.delta": flow("report.delta=0.05", where=lambda j: j.report.delta, expected=0.05),
    "report.primary": flow("report.primary=is", where=lambda j: j.report.primary, expected="is"),
    "report.out": flow("report.out=elsewhere/report", where=lambda j: j.report.out, expected="elsewhere/report"),
    # where the job stores and runs
    "store.path": flow("store.path=elsewhere/store", where=lambda j: j.store.root, expected="elsewhere/store"),
    "store.cache_dir": flow("store.cache_dir=elsewhere/cache", where=lambda j: j.cache_dir, expected="elsewhere/cache"),
    "ray.address": flow("ray.address=auto", where=lambda j: j.ray_address, expected="auto"),
    "ray.num_cpus": flow("ray.num_cpus=1", where=lambda j: j.num_cpus, expected=1),
    "progress": flow("progress=true", where=lambda j: j.progress, expected=True),
    # prices: the PriceTable the replay's cost columns are priced with
    "prices.source": flow("prices.source=my contract", where=lambda j: j.prices.source, expected="my contract"),
    "prices.as_of": flow("prices.as_of=2027-01-01", where=lambda j: j.prices.as_of, expected="2027-01-01"),
    "prices.models": flow(
        "prices.models={openai: {gpt-4o-mini: {output_per_mtok: 0.5}}}",  # merged into the shipped entry
        where=lambda j: j.prices.lookup("openai", "gpt-4o-mini").output_per_mtok,
        expected=0.5,
    ),
    "allow_partial": flow("allow_partial=true", where=lambda j: j.allow_partial, expected=True),
    "allow_large": flow("allow_large=true", where=lambda j: j.allow_large, expected=True),
    "dry_run": flow("dry_run=true", where=lambda j: j.dry_run, expected=True),
}


def job_of(*overrides: str) -> JobSpec:
    return to_job(compose(config_name="config", overrides=list(overrides)))


@pytest.mark.parametrize("key", sorted(schema_keys()))
def test_every_key_reaches_where_it_acts(hydra_ctx, key):
    assert key in FLOWS, f"{key}: a config key with no case in FLOWS (say which field of the job it sets)"
    case = FLOWS[key]
    assert any(o.startswith(f"{key}=") for o in case.overrides), "the case must set its own key"
    before = case.where(job_of(*case.base))
    after = case.where(job_of(*case.base, *case.overrides))
    assert before != case.expected, f"{key}: the default already gives {before!r}"
    assert after == case.expected, f"{key}: set, it gave {after!r} instead of {case.expected!r}"


def test_flows_name_only_keys_the_schema_has():
    assert not set(FLOWS) - schema_keys(), sorted(set(FLOWS) - schema_keys())


def test_defaults_are_the_specs_own(hydra_ctx):
    """One declaration per setting: the sweep's defaults are the runtime specs' defaults."""
    job = job_of()
    assert job.provider == LLAMA_SPEC and job.provider_options == LlamaOptions()
    assert job.generation == GenerationConfig() and job.halt == HaltConfig()
    assert job.weights == WeightsSpec() and job.report == ReportSpec()
    sim = job_of("provider=sim")
    assert sim.provider_options == SimOptions()


class _FakeServer:
    """Stands in for LlamaServer / SimServer: records how the job started it."""

    started: dict[str, Any] = {}

    def __init__(self, **kwargs: Any) -> None:
        _FakeServer.started = kwargs
        self.base_url = "http://127.0.0.1:9/v1"

    def __enter__(self) -> _FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def check(self) -> None:
        return None


def test_server_options_reach_the_server_the_job_starts(hydra_ctx, monkeypatch):
    import shp_ray.providers.llama as llama
    import shp_ray.providers.sim.server as sim_server

    monkeypatch.setattr(llama, "LlamaServer", _FakeServer)
    monkeypatch.setattr(sim_server, "SimServer", _FakeServer)
    options = ("provider.n_threads=2", "provider.n_ctx=2048", "provider.prompt_cache=false", "provider.parallel=3")
    with sweep_job.endpoint(job_of(*options)) as ep:
        assert ep.spec.base_url == "http://127.0.0.1:9/v1" and ep.ephemeral
    started = {"alias": LLAMA_SPEC.model, "n_threads": 2, "n_ctx": 2048, "prompt_cache": False, "parallel": 3}
    assert _FakeServer.started == started
    sim = ("provider=sim", "provider.sim_rpm=120", "provider.sim_fault_rate=0.1", "provider.sim_latency_s=0.5")
    with sweep_job.endpoint(job_of(*sim, "provider.sim_seed=7")):
        pass
    started = SimOptions(**_FakeServer.started)
    assert (started.rpm, started.fault_rate, started.latency_s, started.seed) == (120.0, 0.1, 0.5, 7)
    with sweep_job.endpoint(job_of("provider=sim", "provider.base_url=http://127.0.0.1:8/v1")) as ep:
        assert ep.spec.base_url == "http://127.0.0.1:8/v1" and not ep.ephemeral  # a running server: none started


def test_ray_and_progress_settings_reach_generate(hydra_ctx, monkeypatch, tmp_path):
    calls: list[dict[str, Any]] = []

    def fake_generate(scenarios, cfg, store_root, spec, options):
        calls.append({"cfg": cfg, "store": store_root, "spec": spec, **vars(options)})

    @contextlib.contextmanager
    def fake_lease(store, gen_id, *, ray_address=None):
        calls.append({"lease_address": ray_address})  # the real lease would join that cluster
        yield 0.0

    monkeypatch.setattr(sweep_job, "generate", fake_generate)
    monkeypatch.setattr(sweep_job, "generation_lease", fake_lease)
    monkeypatch.setattr(sweep_job, "preflight", lambda spec, watchdog: None)
    job = job_of(
        "provider=openai", "provider.base_url=http://127.0.0.1:9/v1", f"store.path={tmp_path / 'store'}",
        "ray.address=auto", "ray.num_cpus=1", "progress=false", f"store.cache_dir={tmp_path / 'cache'}",
    )  # fmt: skip
    store = job.store
    sweep_job.ensure_generation(job, store, load_scenarios(job.dataset, split=job.split, limit=1), "run-1", "t")
    lease, call = calls
    assert lease == {"lease_address": "auto"}
    assert (call["ray_address"], call["num_cpus"], call["progress"]) == ("auto", 1, False)
    assert call["cache_dir"] == str(tmp_path / "cache")
    assert call["cfg"] == job.generation and call["spec"] == job.provider and call["store"] is store


@pytest.mark.parametrize("flag", ["critic", "entropy", "gain"])
def test_cascade_flags_are_chosen_by_cell_not_by_a_base_key(hydra_ctx, flag):
    # A base flag would change no replayed policy (each named cascade fixes its own): it is refused.
    with pytest.raises(Exception, match=flag):
        job_of(f"halting.{flag}=false")
    cell = {"critic": "abl_no_critic", "entropy": "abl_no_entropy", "gain": "abl_no_gain"}[flag]
    (policy,) = job_of(f"replay.policies=[{cell}]").policies
    assert getattr(policy.halt, flag) is False
