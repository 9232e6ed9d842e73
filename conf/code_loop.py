"""The code loop's settings (``dataset=humaneval``, ``generation.critic``, ``score=tests``): the rules that relate
them, checked with the rest of :func:`conf.resolve.to_job`, before anything starts.

``dataset=humaneval`` selects its own defaults (``sweeps/dataset/humaneval.yaml``: the ``code-v1`` prompts,
``critic=tests``, ``score=tests``); any of them can be overridden on the command line. The Critic modes that run
tests, and the ``tests`` scorer, need tasks that carry tests: HumanEval's.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from conf.errors import ConfigError
from shp_ray.generation.config import CRITIC_MODES
from shp_ray.generation.humaneval import HUMANEVAL

CODE_DATASETS = (HUMANEVAL,)  # datasets whose tasks carry visible and hidden tests


def check(cfg: DictConfig) -> None:
    """``generation.critic`` is a known mode; a tests critic or scorer runs on a code dataset."""
    critic = OmegaConf.select(cfg, "generation.critic", default="llm")
    if critic not in CRITIC_MODES:
        raise ConfigError(f"generation.critic: must be one of {list(CRITIC_MODES)}, got {critic!r}")
    dataset = OmegaConf.select(cfg, "dataset.name")
    if critic != "llm" and dataset not in CODE_DATASETS:
        raise ConfigError(
            f"generation.critic: {critic} runs each draft's visible tests, which only the tasks of "
            f"{list(CODE_DATASETS)} carry (dataset={dataset}); use generation.critic=llm"
        )
    if OmegaConf.select(cfg, "score.kind") == "tests" and dataset not in CODE_DATASETS:
        raise ConfigError(
            f"score.kind: tests runs each draft's hidden tests, which only the tasks of {list(CODE_DATASETS)} "
            f"carry (dataset={dataset})"
        )
