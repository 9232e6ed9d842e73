"""What ``shp-sweep`` says about its own command line: ``--help`` (the config groups and the presets, one
line each) and, after Hydra refused an override, the known key nearest to a mistyped one.

Both read the config tree as registered (``conf.schema`` in Hydra's ConfigStore) and the preset files
(``sweeps/sweep/*.yaml``), so a new setting, option or preset shows up here without an edit.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

import conf.schema  # noqa: F401  (registers the config tree)
from shp_ray.policy.checks import nearest
from sweeps.plan import CONFIRM

GROUPS = {  # one line each; the options are read from the ConfigStore
    "provider": "where the Writer, Critic and LLM judge calls go (llama: the embedded local model, no key)",
    "dataset": "the tasks: HotpotQA, the SHP paper's frozen split, ASQA, HumanEval (the code loop), your file",
    "judge": "what scores each draft into IS (lexical: deterministic token overlap, not an LLM)",
    "prices": "the price table of the cost columns (default: shp_ray/data/prices.yaml)",
    "prompts": "the Writer's and Critic's templates (yours: prompts.file=PATH.yaml, or <config-dir>/prompts/NAME.yaml)",
    "score": "what scores each stored draft (python: score.target=path/to/file.py:fn or module:fn)",
}
SECTIONS = {
    "generation": "the loop: max_rounds, temperature, seed, max_tokens, embedder, workers, critic (the code loop)",
    "halting": "the cascade's parameters: " + ", ".join(conf.schema.HALTING_KEYS),
    "weights": "IS weights: strategy=uniform|entropy|ahp (ahp: pairwise, force)",
    "replay": "which policies replay: policies=[standard], [standard,families] or names; random_seeds",
    "report": "enabled, delta (the non-inferiority margin), out, primary (the outcome it leads with: a score or is)",
    "store": "path: a folder or s3://bucket/prefix; cache_dir (null: <store>/_cache)",
    "ray": "address: null (start Ray here), auto or host:port (join a cluster); num_cpus",
}
FLAGS = {  # the top-level settings (key=value, no section)
    "dry_run=true": "print each job's plan (scenarios, calls, tokens, dollars, wall time) and stop: no call",
    "+confirm=true": "run a plan past the cost gate (a yes for this command, never stored)",
    "allow_large=true": "allow a plan past the soft bounds (more than 20 rounds, 100,000 paid calls)",
    "allow_partial=true": "replay a job whose failed scenarios are left out (default: it fails, exit 1)",
    "progress=true|false": "the progress line (default: live on a terminal, else logged every 10 s)",
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
    lines += ["", "Settings (section.name=value; `--cfg job` lists them all):"]
    lines += [f"  {s + '.*':<{width}}{said}" for s, said in SECTIONS.items()]
    lines += ["", "Flags:"]
    lines += [f"  {flag:<{width}}{said}" for flag, said in FLAGS.items()]
    lines += ["", "Presets (+sweep=NAME; they compose: '+sweep=[paper,ablation7]'):"]
    lines += [f"  {'+sweep=' + name:<{width}}{said}" for name, said in presets().items()]
    lines += ["", "Docs: docs/sweeps.md (sweeps and config), docs/your-loop.md (your tasks, prompts and scorer),"]
    lines += ["      docs/store.md (the store and its SQL)."]
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
        near = nearest(key, known)
        hint = f"; did you mean `{near}`?" if near else "; `shp-sweep --help` lists the groups and sections"
        said.append(f"shp-sweep: `{key}` is no key of the config{hint}")
    return said


def unknown_keys(argv: Sequence[str]) -> list[str]:
    """:func:`suggestions`, said before Hydra where the config is only ours: a folder of the user's (``--config-dir``,
    ``hydra.searchpath``) may add groups and keys that only Hydra knows, so there Hydra decides first."""
    if _config_dirs(argv) or any(arg.split("=", 1)[0].lstrip("+~") == "hydra.searchpath" for arg in argv):
        return []
    return suggestions(argv)


def wrong_values(argv: Sequence[str]) -> list[str]:
    """One line per override whose value its setting's type refuses (``generation.max_rounds=abc``), said before
    Hydra, whose own message is seven lines of its internals. Only the schema's own sections are checked (a group's
    keys depend on the option chosen: Hydra checks those); the value is not repeated (it may hold a secret)."""
    if _config_dirs(argv) or any(arg.split("=", 1)[0].lstrip("+~") == "hydra.searchpath" for arg in argv):
        return []
    root = ConfigStore.instance().load("schema.yaml").node
    parser = OverridesParser.create()
    said = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg or "${" in arg:
            continue
        try:
            override = parser.parse_override(arg)
        except HydraException:
            continue  # not Hydra's grammar: Hydra says so
        key = override.key_or_group
        if override.is_sweep_override() or override.is_delete() or key.split(".")[0] in GROUPS:
            continue
        if OmegaConf.select(root, key, default=_ABSENT) is _ABSENT:
            continue  # no such key: suggestions() names the nearest
        try:
            OmegaConf.update(copy.deepcopy(root), key, override.value(), merge=True)
        except OmegaConfBaseException as exc:
            said.append(f"shp-sweep: `{key}` {_refusal(str(exc))}")
    return said


_ABSENT = object()


def _refusal(message: str) -> str:
    """What OmegaConf's refusal says of the type, without the value it quotes."""
    first = message.splitlines()[0] if message else ""
    if m := re.search(r"could not be converted to (\w+)", first):
        return f"takes {_TYPE_NAMES.get(m.group(1), m.group(1))}; the value given is not one"
    if "is not a valid bool" in first:
        return f"takes {_TYPE_NAMES['Boolean']}; the value given is not one"
    if m := re.search(r"expected one of (\[.*\])", first):
        return f"takes one of {m.group(1)}"
    return "does not take the value given (its type refuses it)"


_TYPE_NAMES = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "text"}


_SWEEP_FUNCTION = re.compile(r"^\w+\(")  # choice(...), range(...), glob(...): Hydra's sweep syntax, not a name


def _config_dirs(argv: Sequence[str]) -> list[Path]:
    """The folders ``--config-dir`` / ``-cd`` add to the search path (their options count as known)."""
    found = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            found.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            found.append(Path(arg.split("=", 1)[1]))
    return found


def option_typos(argv: Sequence[str]) -> list[str]:
    """One line per group option or preset the config does not have (``provider=smi``, ``+sweep=ablaton7``),
    naming the nearest known one: said before Hydra, whose own message is a stack of its search path."""
    if any(arg.split("=", 1)[0].lstrip("+~") == "hydra.searchpath" for arg in argv):
        return []  # options from folders of the user's choosing: Hydra's own check
    dirs = _config_dirs(argv)
    said = []
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        group = key.lstrip("+~")
        if group not in (*GROUPS, "sweep") or "${" in value or _SWEEP_FUNCTION.match(value):
            continue
        known = set(presets()) if group == "sweep" else set(_options(group))
        known |= {p.stem for d in dirs if (d / group).is_dir() for p in (d / group).glob("*.yaml")}
        for option in (v.strip() for v in value.strip("[]").split(",")):
            if not option or option in known or option == "null":
                continue
            near = nearest(option, known, cutoff=0.5)
            hint = f"did you mean `{key}={near}`?" if near else f"known: {', '.join(sorted(known))}"
            said.append(
                f"shp-sweep: `{key}={option}`: no {group} {'preset' if group == 'sweep' else 'option'} "
                f"of that name; {hint}"
            )
    return said
