"""The config tree: defaults, presets, typos refused by Hydra, domain errors named by key."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

import conf.schema  # noqa: F401
from conf.resolve import ConfigError, snapshot, to_job


@pytest.fixture(scope="module")
def hydra_ctx():
    with initialize_config_module(config_module="conf", version_base="1.3"):
        yield


def job_of(*overrides: str):
    return to_job(compose(config_name="config", overrides=list(overrides)))


def test_defaults_are_the_embedded_model_on_hotpotqa_with_the_lexical_judge(hydra_ctx):
    job = job_of()
    assert job.provider.kind == "llama" and job.provider.base_url == ""
    assert job.dataset == "hotpotqa" and job.generation.judge == "lexical"
    assert (job.halt.eps, job.halt.k, job.halt.warmup, job.halt.max_rounds) == (0.06, 2, 2, 6)
    assert {p.name for p in job.policies} >= {"shp", "entropy_only", "fixed_k6", "oracle_is", "abl_gain_only"}
    assert job.provider_options["n_threads"] == 1


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
        ("halting.eps=3.0", "halting"),
        ("halting.k=0", "halting"),
        ("halting.max_rounds=9", "halting.max_rounds"),
        ("generation.temperature=-1", "generation"),
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
    assert str(err.value).startswith(key)


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
