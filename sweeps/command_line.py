"""What ``shp-sweep`` says about its own command line: ``--help`` (the config groups and the presets, one
line each) and, after Hydra refused an override, the known key nearest to a mistyped one.

Both read the config tree as registered (``conf.schema`` in Hydra's ConfigStore) and the preset files
(``sweeps/sweep/*.yaml``), so a new setting, option or preset shows up here without an edit.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from importlib import resources

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

import conf.schema  # noqa: F401  (registers the config tree)
from sweeps.plan import CONFIRM

GROUPS = {  # one line each; the options are read from the ConfigStore
    "provider": "where the Writer, Critic and LLM judge calls go (llama: the embedded local model, no key)",
    "dataset": "the tasks: HotpotQA, the SHP paper's frozen split, ASQA, HumanEval (the code loop), your file",
    "judge": "what scores each draft into IS (lexical: deterministic token overlap, not an LLM)",
    "prices": "the price table of the cost columns (default: shp_ray/data/prices.yaml)",
}
SECTIONS = {
    "generation": "the loop: max_rounds, temperature, seed, max_tokens, embedder, workers, critic (the code loop)",
    "halting": "the cascade's parameters: eps, k, warmup, max_rounds, min_gain",
    "weights": "IS weights: strategy=uniform|entropy|ahp",
    "replay": "which policies replay: policies=[standard], [standard,families] or names",
    "report": "enabled, delta (the non-inferiority margin), out",
    "store": "path: a folder or s3://bucket/prefix",
    "ray": "address: null (start Ray here), auto or host:port (join a cluster); num_cpus",
}
USAGE = """\
shp-sweep: generate the Writer -> Critic trajectories a config needs (once; the store keeps them), replay
every stopping policy over them, write results rows and a report.

usage: shp-sweep [key=value ...]             one job
       shp-sweep -m key=v1,v2 [key=value ...] a multirun: one job per combination (-m = --multirun)
       shp-sweep --cfg job [key=value ...]    print the composed config (every key and its value), run nothing
       shp-sweep --hydra-help                 Hydra's own flags
"""


def _registered(group: str) -> list[str]:
    return sorted(name.removesuffix(".yaml") for name in ConfigStore.instance().list(group))


def _options(group: str) -> list[str]:
    """The group's options: the registered ones and the option files of ``sweeps/<group>/`` (dataset=humaneval,
    whose keys are a registered option's)."""
    names = set(_registered(group))
    folder = resources.files("sweeps").joinpath(group)
    if folder.is_dir():
        names |= {p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")}
    return sorted(names)


def presets() -> dict[str, str]:
    """Each preset of ``sweeps/sweep/`` and the first sentence of its description (its leading comment)."""
    found = {}
    for path in sorted(resources.files("sweeps").joinpath("sweep").iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml"):
            continue
        comments = [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]
        prose = " ".join(c for c in comments if c and not c.startswith(("@package", "shp-sweep")))
        found[path.name.removesuffix(".yaml")] = prose.split(". ", 1)[0].removesuffix(".")  # its first sentence
    return found


def help_text() -> str:
    lines = [USAGE, "Config groups (group=option):"]
    choices = {g: f"{g}={'|'.join(_options(g))}" for g in GROUPS}
    width = max(len(c) for c in choices.values()) + 2
    lines += [f"  {choices[g]:<{width}}{said}" for g, said in GROUPS.items()]
    lines += ["", "Settings (section.key=value; `--cfg job` lists them all):"]
    lines += [f"  {s + '.*':<{width}}{said}" for s, said in SECTIONS.items()]
    lines += [f"  {'allow_partial, progress':<{width}}replay a job whose failed scenarios are left out; a live line"]
    lines += ["", "Presets (+sweep=NAME; they compose: '+sweep=[paper,ablation7]'):"]
    lines += [f"  {'+sweep=' + name:<{width}}{said}" for name, said in presets().items()]
    lines += ["", "Docs: docs/sweeps.md (sweeps and config), docs/store.md (the store and its SQL)."]
    return "\n".join(lines)


def _keys(node: DictConfig, prefix: str) -> Iterable[tuple[str, bool]]:
    """(key, open): every key under ``node``; open = a mapping that takes keys of the user's choosing."""
    for key in node:
        full = f"{prefix}{key}"
        child = node._get_node(key)
        if isinstance(child, DictConfig):
            is_open = OmegaConf.get_type(child) is dict
            yield full, is_open
            if not is_open:
                yield from _keys(child, f"{full}.")
        else:
            yield full, False


def known_keys() -> tuple[set[str], set[str]]:
    """Every key an override may set (groups and their options' keys included) and the open mappings."""
    cs = ConfigStore.instance()
    pairs = list(_keys(cs.load("schema.yaml").node, ""))
    for group in GROUPS:
        pairs.append((group, False))
        for option in _registered(group):
            pairs += _keys(cs.load(f"{group}/{option}.yaml").node, f"{group}.")
    pairs.append(("sweep", False))
    pairs.append((CONFIRM, False))  # +confirm=true: a yes for one command, never a setting of the schema
    return {k for k, _ in pairs}, {k for k, is_open in pairs if is_open}


def suggestions(argv: Iterable[str]) -> list[str]:
    """One line per override whose key the config does not know, naming the nearest known key."""
    known, open_maps = known_keys()
    said = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~")
        if not key or key in known or key.startswith("hydra") or "/" in key:
            continue
        if any(key.startswith(f"{m}.") for m in open_maps):
            continue
        near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean `{near[0]}`?" if near else "; `shp-sweep --help` lists the groups and sections"
        said.append(f"shp-sweep: `{key}` is no key of the config{hint}")
    return said
