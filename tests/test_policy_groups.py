"""Every table lists its policies grouped by family with what each needs (shp_ray.policy.groups): the cascade and its
baselines first, each registered family in the registry's order, the bounds and the resampling control last; the
answer families say they need each draft's answer, the control a critic=none generation."""

from __future__ import annotations

import html

from shp_ray.policy import groups, resample
from shp_ray.policy.families.registry import FAMILIES
from shp_ray.policy.table import family_policies, standard_policies
from sweeps import summary as sweep_summary
from sweeps import summary_page

NAMES = [p.name for p in standard_policies() + family_policies()] + ["oracle_hidden_pass", resample.NAME]


def test_families_come_in_the_registrys_order_and_the_bounds_last() -> None:
    order = groups.ordered(NAMES)
    assert order[0] == "fixed_k1" and order[-3:] == ["oracle_hidden_pass", "oracle_is", resample.NAME]
    places = [groups.group(n).order for n in order]
    assert places == sorted(places)  # grouped: one family's policies in a row
    kinds = list(dict.fromkeys(groups.group(n).family for n in order))
    labels = [FAMILIES[k].label for k in FAMILIES]
    assert [k for k in kinds if k in labels] == labels  # the registry's order


def test_what_each_family_needs() -> None:
    for name in ("answer_stable", "answer_runlength", "adaptive_consistency", "sprt"):
        assert groups.group(name).needs == groups.ANSWERS
    assert groups.group("sim_threshold").needs == groups.EMBEDDINGS
    assert groups.CRITIQUES in groups.group("consensus").needs  # it reads the critique's embedding too
    assert groups.JUDGE in groups.group("shp").needs and groups.group("entropy_only").needs == groups.EMBEDDINGS
    assert groups.group("fixed_k1").needs == "nothing" and groups.group("random_s0").needs == "nothing"
    assert groups.group(resample.NAME).needs == groups.RESAMPLED
    assert groups.group("sprt@p0=0.4").family == groups.group("sprt").family  # parameters keep the family
    assert groups.group("my_own_rule").family == "other"  # a name no table knows is listed, last


def test_the_legend_holds_every_policy_once_under_its_family() -> None:
    lines = groups.legend(NAMES)
    assert lines[:2] == ["| family | policies | needs |", "|---|---|---|"]
    listed = [n.strip(" `") for line in lines[2:] for n in line.split(" | ")[1].split(",")]
    assert sorted(listed) == sorted(NAMES)
    answer = next(line for line in lines if "`answer_stable`" in line)
    assert answer.endswith(f"| {groups.ANSWERS} |")
    cascade = next(line for line in lines if line.startswith("| SHP cascade |"))
    assert all(n in cascade for n in (groups.EMBEDDINGS, "the Critic's verdict", groups.JUDGE))  # the union


def test_the_sweep_summary_lists_its_policies_by_family(tmp_path) -> None:
    summary = [{"policy": p, "job": "j", "dir": "d", "report": None, "outcomes": {}, "lead": {}, "primary": "is",
                "best": False, "n": 4, "token_saving": 0.1, "split": "test"}
               for p in ("shp", "answer_stable", "sprt", "fixed_k1")]  # fmt: skip
    md = sweep_summary.markdown(summary, {}, "summary.png", "summary.html")
    legend = md[md.index("| family | policies | needs |") :].splitlines()
    assert [line.split(" | ")[0] for line in legend[2:6]] == [
        "| fixed depth (fixed_k1: never revise)", "| SHP cascade", "| answer stability", "| SPRT (answer agreement)"
    ]  # fmt: skip
    page = summary_page.families_html(r["policy"] for r in summary)
    assert page.startswith('<table class="families">') and f"<td>{html.escape(groups.ANSWERS)}</td>" in page
    assert page.count("<tr>") == 5  # the heading and four families
