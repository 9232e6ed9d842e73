"""The config tree: defaults, presets, typos refused by Hydra, domain errors named by key."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

import conf.schema  # noqa: F401
from conf.resolve import ConfigError, to_job
from conf.rules import MAX_RETRIES, RULES
from shp_ray.generation.config import GenerationConfig
from shp_ray.generation.prompts import TEMPLATE_KEYS
from shp_ray.policy.cascade import HaltConfig
from shp_ray.providers.llama import MACHINE_CPUS
from sweeps.job import check_folders, snapshot


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def job_of(*overrides: str):
    """The job shp-sweep would run: the config resolved, then its folders checked on disk."""
    job = to_job(compose(config_name="config", overrides=list(overrides)))
    check_folders(job)
    return job


def test_defaults_are_the_embedded_model_on_hotpotqa_with_the_lexical_judge(hydra_ctx):
    job = job_of()
    assert job.provider.kind == "llama" and job.provider.base_url == ""
    assert job.dataset == "hotpotqa" and job.generation.judge == "lexical"
    assert (job.halt.eps, job.halt.k, job.halt.warmup, job.halt.max_rounds) == (0.06, 2, 2, 6)
    assert {p.name for p in job.policies} >= {"shp", "entropy_only", "fixed_k6", "oracle_is", "abl_gain_only"}
    assert job.provider_options.n_threads == max(1, MACHINE_CPUS - 1)  # the server's threads follow the machine


def test_halting_max_rounds_follows_generation(hydra_ctx):
    job = job_of("generation.max_rounds=3")
    assert job.halt.max_rounds == 3
    assert "fixed_k3" in {p.name for p in job.policies}


def test_a_typo_fails_with_hydras_own_error(hydra_ctx):
    with pytest.raises(ConfigCompositionException, match="provider.bse_url"):
        job_of("provider.bse_url=http://x")
    with pytest.raises(ConfigError, match=r"^halting.epsilon: unknown key"):
        job_of("+halting.epsilon=0.1")
    with pytest.raises(ConfigError, match=r"^colour: unknown key"):
        job_of("+colour=red")


def test_a_wrong_type_fails_in_hydra(hydra_ctx):
    with pytest.raises((ConfigCompositionException, ValidationError)):
        job_of("halting.k=two")


@pytest.mark.parametrize(
    "override, key",
    [
        ("halting.eps=3.0", "halting.eps"),
        ("halting.k=0", "halting.k"),
        ("halting.max_rounds=9", "halting.max_rounds"),
        ("generation.temperature=-1", "generation.temperature"),
        ("dataset.split=train", "dataset.split"),
        ("dataset.limit=0", "dataset.limit"),
        ("replay.policies=[fixed_kx]", "replay.policies"),
        ("provider.kind=bedrock", "provider.kind"),
        ("weights.strategy=magic", "weights.strategy"),
        ("report.delta=0", "report.delta"),
    ],
)
def test_domain_errors_name_the_key(hydra_ctx, override, key):
    with pytest.raises(ConfigError) as err:
        job_of(override)
    assert str(err.value).startswith(f"{key}: ")


# One case per rule: (overrides, the full key the message must start with).
BAD_SETTINGS = [
    (["provider=sim", "provider.rpm=-5"], "provider.rpm"),
    (["provider=sim", "provider.rpm=0"], "provider.rpm"),
    (["provider=sim", "provider.rpm=nan"], "provider.rpm"),
    (["provider=openai", "provider.tpm=-1"], "provider.tpm"),
    (["provider=openai", "provider.tpm=inf"], "provider.tpm"),
    (["provider.max_concurrency=0"], "provider.max_concurrency"),
    (["provider.max_retries=-1"], "provider.max_retries"),
    ([f"provider.max_retries={MAX_RETRIES + 1}"], "provider.max_retries"),
    (["provider.timeout_s=0"], "provider.timeout_s"),
    (["provider.timeout_s=-3"], "provider.timeout_s"),
    (["provider.timeout_s=inf"], "provider.timeout_s"),
    (["provider=openai", "provider.base_url=ftp://example.org/v1"], "provider.base_url"),
    (["provider=openai", "provider.base_url=localhost:8000"], "provider.base_url"),
    (["provider=openai", "provider.api_key_env=MY KEY"], "provider.api_key_env"),
    (["provider=openai", "provider.model="], "provider.model"),
    (["provider.n_threads=0"], "provider.n_threads"),
    (["provider.n_ctx=128"], "provider.n_ctx"),
    (["provider.parallel=0"], "provider.parallel"),
    (["provider.n_ctx=512", "generation.max_tokens=512"], "provider.n_ctx"),  # no room left for the prompt
    (["provider=sim", "provider.sim_rpm=0"], "provider.sim_rpm"),
    (["provider=sim", "provider.sim_rpm=-60"], "provider.sim_rpm"),
    (["provider=sim", "provider.sim_fault_rate=1.5"], "provider.sim_fault_rate"),
    (["provider=sim", "provider.sim_fault_rate=-0.1"], "provider.sim_fault_rate"),
    (["provider=sim", "provider.sim_latency_s=-1"], "provider.sim_latency_s"),
    (["provider=sim", "provider.sim_latency_s=inf"], "provider.sim_latency_s"),
    (["provider.batch=true"], "provider.batch"),  # the embedded llama.cpp server has no Batch API
    (["provider=sim", "provider.batch_poll_s=0"], "provider.batch_poll_s"),
    (["provider=sim", "provider.batch_max_tries=0"], "provider.batch_max_tries"),
    (["provider=sim", "judge.batch=true"], "judge.batch"),  # the lexical judge makes no call
    (["judge=llm", "judge.batch=true"], "judge.batch"),  # judge=llm on llama.cpp: no Batch API
    (["dataset.name=squad"], "dataset.name"),
    (["dataset.limit=-2"], "dataset.limit"),
    (["judge.kind=human"], "judge.kind"),
    (["generation.max_rounds=0"], "generation.max_rounds"),
    (["generation.seed=-1"], "generation.seed"),
    (["generation.max_tokens=0"], "generation.max_tokens"),
    (["generation.workers=0"], "generation.workers"),
    (["generation.concurrency=0"], "generation.concurrency"),
    (["generation.temperature=nan"], "generation.temperature"),
    (["generation.embedder="], "generation.embedder"),
    (["prompts=shp-wc-v1", "prompts.writer.user=''"], "prompts.writer.user"),
    (["prompts.critic.user='Round: {round} {draft'"], "prompts.critic.user"),  # an unclosed brace
    (["prompts.writer.revise='Fix {draft} per {feedbak}'"], "prompts.writer.revise"),  # names no field
    (["prompts.writer.system='You are the {0}'"], "prompts.writer.system"),  # positional
    (["prompts.approval=' OK'"], "prompts.approval"),
    (["dataset=file"], "dataset.path"),  # required
    (["dataset=file", "dataset.path=t.jsonl", "dataset.fields.id=''"], "dataset.fields.id"),
    (["dataset=file", "dataset.path=' '"], "dataset.path"),
    (["halting.warmup=0"], "halting.warmup"),
    (["halting.min_gain=inf"], "halting.min_gain"),
    (["weights.strategy=constrained_ls"], "weights.strategy"),
    (["weights.strategy=ahp"], "weights.pairwise"),
    (["weights.strategy=ahp", "weights.pairwise=[[1.0,2.0],[0.5,1.0]]"], "weights.pairwise"),
    (["replay.policies=[]"], "replay.policies"),
    (["replay.random_seeds=[0,-1]"], "replay.random_seeds"),
    (["report.delta=-0.1"], "report.delta"),
    (["report.delta=1.0"], "report.delta"),
    (["report.delta=nan"], "report.delta"),
    (["report.out=s3://bucket/report"], "report.out"),
    (["store.path=' '"], "store.path"),
    (["store.cache_dir=s3://bucket/cache"], "store.cache_dir"),  # SQLite needs a local folder
    (["ray.num_cpus=0"], "ray.num_cpus"),
    (["ray.address=somewhere"], "ray.address"),
    (["ray.address=head:99999"], "ray.address"),
    # magnitudes: each has a range (conf.plan), said in the message
    (["provider=sim", "provider.rpm=1e-300"], "provider.rpm"),  # used to hang for ten minutes without a word
    (["provider=sim", "provider.rpm=1e9"], "provider.rpm"),
    (["provider=openai", "provider.tpm=10"], "provider.tpm"),
    (["provider.timeout_s=0.001"], "provider.timeout_s"),
    (["provider.timeout_s=1e9"], "provider.timeout_s"),
    (["provider.max_concurrency=100000"], "provider.max_concurrency"),
    (["provider.n_threads=100000"], "provider.n_threads"),
    (["provider.n_ctx=100000000"], "provider.n_ctx"),
    (["provider=sim", "provider.batch_poll_s=1e9"], "provider.batch_poll_s"),
    (["provider=sim", "provider.batch_max_tries=1000000"], "provider.batch_max_tries"),
    (["provider=sim", "provider.sim_rpm=1e-300"], "provider.sim_rpm"),
    (["provider=sim", "provider.sim_latency_s=1e6"], "provider.sim_latency_s"),
    (["dataset.limit=1000000000"], "dataset.limit"),
    (["generation.max_rounds=1000000"], "generation.max_rounds"),  # used to start a two-million-call run
    (["generation.max_rounds=1000000", "allow_large=true"], "generation.max_rounds"),  # a range, not a soft bound
    (["generation.max_tokens=100000000"], "generation.max_tokens"),
    (["generation.workers=100000"], "generation.workers"),
    (["generation.concurrency=100000"], "generation.concurrency"),
    # a plan beyond the soft bounds needs allow_large=true
    (["generation.max_rounds=21"], "generation.max_rounds"),
    (["dataset.limit=2501", "generation.max_rounds=20"], "dataset.limit"),  # 100,040 paid calls
    (["dataset.limit=100000", "judge=llm"], "dataset.limit"),
    # URL credentials are basic auth: with an API key too, the request would carry two Authorization headers
    (["provider=openai", "provider.base_url=https://user:pw@proxy.example/v1"], "provider.base_url"),
    (["score=python"], "score.target"),
    (["score=python", "score.target=no_such_module_here:score"], "score.target"),
    (["score=python", "score.target=shp_ray.policy.scorers:no_such_function"], "score.target"),
    (["score=regex", "score.pattern='Answer: (.+)'"], "score.pattern"),  # no named group to extract
    (["score=regex", "score.pattern='(?P<answer>'"], "score.pattern"),
    (["score=tests"], "score.kind"),  # the code loop's scorer: not built yet, and it says so
]


@pytest.mark.parametrize("overrides, key", BAD_SETTINGS, ids=[" ".join(o) for o, _ in BAD_SETTINGS])
def test_every_bad_setting_is_refused_naming_its_full_key(hydra_ctx, overrides, key):
    with pytest.raises(ConfigError) as err:
        job_of(*overrides)
    assert str(err.value).startswith(f"{key}: "), str(err.value)
    assert "\n" not in str(err.value)  # one line, as printed by shp-sweep


def test_an_inconsistent_ahp_matrix_is_refused_unless_forced(hydra_ctx):
    # Saaty's 1..9 scale, reciprocal but inconsistent (CR far above 0.10).
    m = "[[1.0,9.0,0.2,1.0],[0.1111111111111111,1.0,9.0,1.0],[5.0,0.1111111111111111,1.0,1.0],[1.0,1.0,1.0,1.0]]"
    with pytest.raises(ConfigError, match=r"^weights\.pairwise: .*weights\.force=true"):
        job_of("weights.strategy=ahp", f"weights.pairwise={m}")
    assert job_of("weights.strategy=ahp", f"weights.pairwise={m}", "weights.force=true").weights.force is True


@pytest.mark.parametrize(
    "overrides, said",
    [
        (["provider.timeout_s=1e9"], "provider.timeout_s: must be a finite number in [1, 3600], got 1000000000.0"),
        (["generation.max_rounds=1000000"], "generation.max_rounds: must be an integer in [1, 100], got 1000000"),
        (
            ["generation.max_rounds=30"],
            "generation.max_rounds: 30 rounds is above 20 (the soft bound); add allow_large",
        ),
        (
            ["dataset.limit=50000"],
            "dataset.limit: 50000 scenarios x 6 rounds plan up to 600,000 paid calls, above 100,000",
        ),
    ],
)
def test_a_magnitude_out_of_bounds_says_its_range_or_the_override(hydra_ctx, overrides, said):
    with pytest.raises(ConfigError) as err:
        job_of(*overrides)
    assert str(err.value).startswith(said), str(err.value)


def test_a_large_plan_runs_when_asked_for_by_name(hydra_ctx):
    job = job_of("generation.max_rounds=30", "dataset.limit=50000", "allow_large=true")
    assert (job.generation.max_rounds, job.halt.max_rounds, job.limit, job.allow_large) == (30, 30, 50000, True)


def test_url_credentials_with_an_api_key_are_refused_without_echoing_the_password(hydra_ctx):
    secret = "S3CRET-url-password"
    with pytest.raises(ConfigError) as err:
        job_of("provider=openai", f"provider.base_url=https://user:{secret}@proxy.example/v1")
    said = str(err.value)
    assert said.startswith("provider.base_url: ") and "provider.api_key_env=OPENAI_API_KEY" in said
    assert secret not in said and "\n" not in said
    assert job_of(
        "provider=openai", f"provider.base_url=https://user:{secret}@proxy.example/v1", "provider.api_key_env="
    )


def test_a_key_pasted_into_api_key_env_is_refused_and_not_echoed(hydra_ctx):
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    with pytest.raises(ConfigError) as err:
        job_of("provider=openai", f"provider.api_key_env={secret}")
    assert str(err.value).startswith("provider.api_key_env: ") and secret not in str(err.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["provider=sim", "provider.rpm=null", "provider.tpm=null", "provider.sim_rpm=null"],
        ["provider=sim", "provider.rpm=1", "provider.sim_fault_rate=1.0", "provider.sim_latency_s=0"],
        ["provider=sim", "provider.rpm=1e6", "provider.tpm=1e10", "provider.sim_rpm=1", "provider.sim_latency_s=600"],
        ["provider.max_retries=0", f"provider.max_retries={MAX_RETRIES}"],
        ["provider.timeout_s=1", "provider.n_ctx=257", "generation.max_tokens=256"],
        ["provider.timeout_s=3600", "provider.max_concurrency=1024", "generation.workers=1024"],
        ["generation.max_rounds=20", "generation.concurrency=1024", "dataset.limit=2500"],  # 100,000 calls
        ["generation.max_rounds=100", "allow_large=true", "dataset.limit=10000000"],
        ["provider=openai", "provider.base_url=https://user:pw@proxy.example/v1", "provider.api_key_env="],
        ["provider=openai", "provider.base_url=http://127.0.0.1:8000/v1", "provider.api_key_env="],
        ["dataset.split=null", "dataset.limit=null", "report.out=null", "report.delta=0.5"],
        ["ray.address=auto"],
        ["ray.address=10.0.0.5:6379"],
        ["ray.address=ray://head:10001"],
        ["replay.random_seeds=[]"],
    ],
)
def test_the_edges_of_every_range_are_accepted(hydra_ctx, overrides):
    job_of(*overrides)  # no ConfigError: the rules are not stricter than they say


# Keys that take any value of their type: free text, switches, or a matrix checked as a whole in to_job.
FREE_KEYS = {
    "provider.model",  # "" refused in to_job; any name otherwise
    "provider.sim_seed",  # hashed, any integer is a seed
    "judge.model",
    "generation.seed",  # GenerationConfig
    "halting.max_rounds",  # HaltConfig + checked against generation.max_rounds
    "weights.pairwise",  # weights.ahp, when strategy=ahp
    "weights.force",
    "report.enabled",
    "progress",
    "allow_partial",  # a bool: Hydra's type check is the whole rule
    "allow_large",  # a bool: what it allows is checked in to_job (conf.plan.oversized)
    "dry_run",  # a bool: print the plan, make no call
    "score.name",  # strings (Hydra's type check); the scorer they build is checked in conf.inputs.resolve_scores
    "score.pattern",
    "score.target",
    "score.timeout_s",  # a number (Hydra's type check); above 0 and finite: checked by building the scorer
    "answer.kind",  # auto | qa | code | python: checked by building the extractor (conf.inputs.resolve_answer)
    "answer.target",  # a string; the function it names is imported by resolve_answer
    "answer.timeout_s",  # a number; above 0 and finite: checked by building the extractor
    "logprobs.request",  # a bool (Hydra's type check); asked of the Writer's calls
    "logprobs.last_k",  # an integer (Hydra's type check); >= 1: checked by building LogprobSpec (resolve_logprobs)
    "dataset.tests",  # docstring | split, with the dataset it needs: checked with the code loop's keys (conf.code_loop)
}


def _schema_keys(kind: type, prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for f in dataclasses.fields(kind):
        sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if isinstance(sub, type) and dataclasses.is_dataclass(sub):
            keys |= _schema_keys(sub, f"{prefix}{f.name}.")
        else:
            keys.add(f"{prefix}{f.name}")
    return keys


def schema_keys() -> set[str]:
    """Every leaf key of the config tree, read from conf/schema.py (group options included)."""
    keys = _schema_keys(conf.schema.Config)
    keys -= {"provider", "dataset", "judge", "prices", "prompts", "score"}  # group nodes: their options' keys below
    for option in conf.schema.PROVIDER_CONFS.values():
        keys |= _schema_keys(option, "provider.")
    keys |= _schema_keys(conf.schema.DatasetConf, "dataset.") | _schema_keys(conf.schema.JudgeConf, "judge.")
    keys |= _schema_keys(conf.schema.PricesConf, "prices.")
    keys |= _schema_keys(conf.schema.FileDatasetConf, "dataset.") | _schema_keys(conf.schema.PromptsConf, "prompts.")
    keys |= _schema_keys(conf.schema.ScoreConf, "score.")
    return keys


def test_every_key_of_the_schema_has_a_rule():
    """A key added to conf/schema.py without a rule fails here (core objects' own checks count)."""
    keys = schema_keys()
    checked = {rule.key for rule in RULES}
    checked |= {f"generation.{f.name}" for f in dataclasses.fields(GenerationConfig)}
    checked |= {f"halting.{f.name}" for f in dataclasses.fields(HaltConfig)}
    checked |= {f"prompts.{key}" for key in (*TEMPLATE_KEYS, "name", "approval")}  # prompts.from_mapping
    checked |= {"prompts.file", "dataset.split_map"}  # conf.inputs: the preset file read, the map's values
    unchecked = keys - checked - FREE_KEYS
    assert not unchecked, f"keys without a validation rule: {sorted(unchecked)}"
    assert not FREE_KEYS - keys, f"FREE_KEYS names keys the schema no longer has: {sorted(FREE_KEYS - keys)}"


def test_a_bad_setting_exits_before_anything_runs(tmp_path):
    """The issue's case: rpm=-5 used to start Ray, write a manifest row and die in an actor."""
    store = tmp_path / "store"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "shp-sweep"), "provider=sim", "provider.rpm=-5",
         f"store.path={store}", "dataset.limit=1"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "CI": "true", "RAY_USAGE_STATS_ENABLED": "0"},
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "shp-sweep: invalid config: provider.rpm: " in done.stderr
    assert "Traceback" not in out
    assert not store.exists()  # no manifest row: not even the store folder
    assert list(tmp_path.iterdir()) == []  # not even Hydra's run folder: a refused job leaves nothing


def test_openai_provider_reads_the_key_from_a_named_variable(hydra_ctx):
    job = job_of("provider=openai", "provider.base_url=http://127.0.0.1:9/v1", "provider.model=m",
                 "provider.api_key_env=MY_KEY", "provider.rpm=60")  # fmt: skip
    assert job.provider.api_key_env == "MY_KEY" and job.provider.rpm == 60


def test_snapshot_redacts_secret_looking_values(hydra_ctx):
    cfg = compose(config_name="config", overrides=["provider=openai", "provider.model=sk-abcdefghijklmnopqrstuv"])
    snap = snapshot(cfg)
    assert "sk-abcdefghijklmnopqrstuv" not in str(snap)
    assert snap["provider"]["api_key_env"] == "OPENAI_API_KEY"  # a variable name, kept


def test_presets_compose(hydra_ctx):
    paper = compose(config_name="config", overrides=["+sweep=paper"])
    job = to_job(paper)
    assert job.dataset == "shp_paper" and job.split == "test" and job.limit is None
    abl = compose(config_name="config", overrides=["+sweep=ablation7"], return_hydra_config=True)
    cells = abl.hydra.sweeper.params["replay.policies"]
    assert cells.count("[abl_") == 7
    grid = compose(config_name="config", overrides=["+sweep=eps_k"], return_hydra_config=True)
    assert grid.dataset.split == "dev"  # tuned on dev
    assert grid.hydra.sweeper.params["halting.k"] == "1,2,3"


def test_one_policy_cell(hydra_ctx):
    job = job_of("replay.policies=[abl_no_gain]")
    assert [p.name for p in job.policies] == ["abl_no_gain"]
    assert (job.policies[0].halt.critic, job.policies[0].halt.entropy, job.policies[0].halt.gain) == (True, True, False)
