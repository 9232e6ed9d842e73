"""Policies grouped by family, with what each needs from the store: one rule for every table that lists policies.

The report's tables (report.md's families section, the correctness tables, RESULTS.md's code sections), the HTML
report's policy table and the sweep summary order their policies by family -- the SHP cascade and its baselines,
then each registered stopping family in the registry's order, then the bounds and controls -- and say what each
family reads: draft or critique embeddings, each draft's extracted answer (``draft_answers``), token
log-probabilities, a verifier, a judge's IS, a ``critic=none`` generation. A store without one of them leaves the
families that need it out of the replay with one line (analysis.replay.family_replay); here it is said up front.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shp_ray.policy import resample
from shp_ray.policy.families.registry import FAMILIES
from shp_ray.policy.table import policy_by_name

EMBEDDINGS = "draft embeddings"
CRITIQUES = "critique embeddings"
ANSWERS = "each draft's answer (draft_answers)"
LOGPROBS = "token log-probabilities"
JUDGE = "a judge's IS"
RESAMPLED = "a critic=none generation"

# What a registered family reads beyond its flags (Family.needs_answers, needs_critique, needs_logprobs say the rest)
_KIND_NEEDS: dict[str, tuple[str, ...]] = {
    "semantic": (EMBEDDINGS,),
    "gain_model": (EMBEDDINGS, CRITIQUES, "a judge's IS on the dev split (the fit)"),
    "verifier": ("a verifier (the visible tests, else the QA check)",),
}


@dataclass(frozen=True)
class Group:
    order: int  # the family's place in every table: the cascade first, the registry's order, bounds last
    family: str  # how the tables name it
    needs: str  # what the store must hold for it ("nothing" for a fixed depth)


def _cascade(policy: str) -> Group:
    halt = policy_by_name(policy).halt
    if policy.startswith("fixed_k"):
        return Group(0, "fixed depth (fixed_k1: never revise)", "nothing")
    needs = [n for n, on in ((EMBEDDINGS, halt.entropy), ("the Critic's verdict", halt.critic), (JUDGE, halt.gain))
             if on]  # fmt: skip
    return Group(1, "SHP cascade", ", ".join(needs) or "nothing")


def _family(kind: str, params: dict[str, object]) -> Group:
    fam = FAMILIES[kind]
    needs = list(_KIND_NEEDS.get(kind, ()))
    if fam.needs_answers:
        needs.append(ANSWERS)
    if fam.needs_logprobs:
        needs.append(LOGPROBS)
    if CRITIQUES not in needs and fam.needs_critique(params):
        needs.append(CRITIQUES)
    return Group(3 + list(FAMILIES).index(kind), fam.label, ", ".join(needs) or "nothing")


def group(policy: str) -> Group:
    """The family of a policy name and what it needs; a name no table knows (a user's own) is grouped last."""
    bound = 3 + len(FAMILIES)
    if policy == resample.NAME:
        return Group(bound + 1, "resampling control (equal compute)", RESAMPLED)
    if policy.startswith("oracle_"):
        score = policy.removeprefix("oracle_")
        return Group(bound, "oracle (a bound, not a policy)", f"{JUDGE if score == 'is' else score} on every round")
    try:
        p = policy_by_name(policy)
    except ValueError:
        return Group(bound + 2, "other", "–")
    if p.kind == "cascade":
        return _cascade(policy)
    if p.kind == "random":
        return Group(2, "random stop", "nothing")
    return _family(p.kind, p.param_dict)


def ordered(policies: Iterable[str]) -> list[str]:
    """The names grouped by family (in :func:`group`'s order), by name within a family."""
    return sorted(policies, key=lambda p: (group(p).order, p))


def families(policies: Iterable[str]) -> list[tuple[str, list[str], str]]:
    """(family, its policies, what it needs: the union over them) of each family of ``policies``, in table order."""
    found: dict[tuple[int, str], tuple[dict[str, None], list[str]]] = {}
    for p in ordered(set(policies)):
        g = group(p)
        needs, names = found.setdefault((g.order, g.family), ({}, []))
        needs.update(dict.fromkeys(n for n in g.needs.split(", ") if n != "nothing"))
        names.append(p)
    return [(family, names, ", ".join(needs) or "nothing") for (_, family), (needs, names) in found.items()]


def legend(policies: Iterable[str]) -> list[str]:
    """A Markdown table: each family of ``policies`` with its policies and what it needs, in table order."""
    lines = ["| family | policies | needs |", "|---|---|---|"]
    for family, names, needs in families(policies):
        lines.append(f"| {family} | {', '.join(f'`{n}`' for n in names)} | {needs} |")
    return lines
