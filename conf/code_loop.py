"""The code loop's settings (``dataset=humaneval``, ``dataset.tests``, ``generation.critic``, ``score=tests``) and
the sampling that epochs and the resampling control need: the rules that relate them, checked with the rest of
:func:`conf.resolve.to_job`, before anything starts.

``dataset=humaneval`` selects its own defaults (``sweeps/dataset/humaneval.yaml``: the ``code-v1`` prompts,
``critic=tests``, ``score=tests``); any of them can be overridden on the command line. The Critic modes that run
tests, and the ``tests`` scorer, need tasks that carry tests: HumanEval's.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from conf.errors import ConfigError
from shp_ray.generation.config import CRITIC_MODES, TEST_SPLITS
from shp_ray.generation.humaneval import HUMANEVAL

CODE_DATASETS = (HUMANEVAL,)  # datasets whose tasks carry visible and hidden tests


def check(cfg: DictConfig) -> None:
    """``generation.critic`` is a known mode; a tests critic or scorer runs on a code dataset."""
    critic = OmegaConf.select(cfg, "generation.critic", default="llm")
    if critic not in CRITIC_MODES:
        raise ConfigError(f"generation.critic: must be one of {list(CRITIC_MODES)}, got {critic!r}")
    dataset = OmegaConf.select(cfg, "dataset.name")
    if critic not in ("llm", "none") and dataset not in CODE_DATASETS:
        raise ConfigError(
            f"generation.critic: {critic} runs each draft's visible tests, which only the tasks of "
            f"{list(CODE_DATASETS)} carry (dataset={dataset}); use generation.critic=llm"
        )
    tests = OmegaConf.select(cfg, "dataset.tests", default="docstring")
    if tests not in TEST_SPLITS:
        raise ConfigError(f"dataset.tests: must be one of {list(TEST_SPLITS)}, got {tests!r}")
    if tests != "docstring" and dataset not in CODE_DATASETS:
        raise ConfigError(
            f"dataset.tests: a public/private split of the hidden tests needs tasks that carry them "
            f"({list(CODE_DATASETS)}; dataset={dataset}); use dataset.tests=docstring"
        )
    _check_sampling(cfg, critic)
    if OmegaConf.select(cfg, "score.kind") == "tests" and dataset not in CODE_DATASETS:
        raise ConfigError(
            f"score.kind: tests runs each draft's hidden tests, which only the tasks of {list(CODE_DATASETS)} "
            f"carry (dataset={dataset})"
        )


def _check_sampling(cfg: DictConfig, critic: str) -> None:
    """Epochs and the resampling control need a Writer that samples: at temperature 0 (or with one seed for every
    call) each epoch, and each resampled round, would be the same request -- the same draft, from the cache."""
    temperature = OmegaConf.select(cfg, "generation.temperature", default=0.0)
    seeding = OmegaConf.select(cfg, "generation.seeding", default="round")
    samples = isinstance(temperature, (int, float)) and temperature > 0 and seeding == "round"
    epochs = OmegaConf.select(cfg, "generation.epochs", default=1)
    for key, asked, what in (
        ("generation.epochs", isinstance(epochs, int) and epochs > 1, f"{epochs} independent trajectories per task"),
        ("generation.critic", critic == "none", "critic=none (each round a fresh sample of the first prompt)"),
    ):
        if asked and not samples:
            raise ConfigError(
                f"{key}: {what} needs a sampling Writer, and this one repeats itself (temperature {temperature}, "
                f"seeding {seeding}): set generation.temperature > 0 with generation.seeding=round"
            )
