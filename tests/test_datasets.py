"""Data builders over the shipped real data; malformed input is named by file and line."""

from __future__ import annotations

import gzip
import json

import pytest

from shp_ray.generation.datasets import DatasetError, load_scenarios, split_of


@pytest.fixture(scope="module")
def hotpot():
    return load_scenarios("hotpotqa")


def test_hotpotqa_builds_every_question_with_gold_plus_distractors(hotpot):
    assert len(hotpot) == 1186
    s = hotpot[0]
    assert s.scenario_id == "hotpot_5a8b57f25542995d1e6f1371"
    assert s.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert s.ground_truth == "yes"
    assert len(s.contexts) == 4
    # Both gold paragraphs are in.
    assert any(c.startswith("Scott Derrickson (born July 16, 1966)") for c in s.contexts)
    assert any(c.startswith("Edward Davis Wood Jr.") for c in s.contexts)
    assert all(len(x.contexts) <= 4 and x.meta["n_gold"] >= 1 for x in hotpot)


def test_split_is_deterministic_and_roughly_a_quarter_dev(hotpot):
    again = load_scenarios("hotpotqa")
    assert [s.split for s in again] == [s.split for s in hotpot]
    assert [s.contexts for s in again[:50]] == [s.contexts for s in hotpot[:50]]
    dev = sum(s.split == "dev" for s in hotpot) / len(hotpot)
    assert 0.20 < dev < 0.30
    assert split_of("5a8b57f25542995d1e6f1371") == hotpot[0].split


def test_split_and_limit_filters():
    dev = load_scenarios("hotpotqa", split="dev", limit=5)
    assert len(dev) == 5 and {s.split for s in dev} == {"dev"}


def test_shp_paper_split_is_kept_as_published():
    s = load_scenarios("shp_paper")
    assert len(s) == 80
    assert sum(x.split == "test" for x in s) == 60
    assert len(load_scenarios("shp_paper", split="dev")) == 20
    assert s[0].ground_truth == "Badly Drawn Boy"


def test_asqa_has_long_form_references():
    s = load_scenarios("asqa")
    assert len(s) == 948
    assert all(len(x.references) >= 1 for x in s)
    assert sum(bool(x.contexts) for x in s) == 885  # the rest have no evidence passages
    assert sum(len(r.split()) for x in s for r in x.references) / sum(len(x.references) for x in s) > 40


def _write_jsonl(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_malformed_line_names_file_and_line(tmp_path):
    good = json.dumps(
        {
            "_id": "a1",
            "answer": "x",
            "question": "q?",
            "supporting_facts": [["T", 0]],
            "context": [["T", ["s1."]], ["U", ["s2."]]],
        }
    )
    bad = _write_jsonl(tmp_path / "h.jsonl", [good, "{not json"])
    with pytest.raises(DatasetError, match=r"h\.jsonl:2: not valid JSON"):
        load_scenarios("hotpotqa", path=bad)
    missing = _write_jsonl(tmp_path / "m.jsonl", [good, json.dumps({"_id": "b"})])
    with pytest.raises(DatasetError, match=r"m\.jsonl:2: missing field"):
        load_scenarios("hotpotqa", path=missing)


def test_gzip_and_duplicates(tmp_path):
    rec = {"sample_id": 1, "ambiguous_question": "q", "annotations": [{"long_answer": "a", "knowledge": []}]}
    path = tmp_path / "a.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(rec) + "\n" + json.dumps(rec) + "\n")
    with pytest.raises(DatasetError, match="duplicate scenario id"):
        load_scenarios("asqa", path=path)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown dataset"):
        load_scenarios("squad")
    with pytest.raises(ValueError, match="unknown split"):
        load_scenarios("hotpotqa", split="train")


def test_a_file_read_again_is_parsed_again_only_when_it_changed(tmp_path):
    """A job loads its dataset more than once; the parse is kept per (file, mtime, size), so an edited file is
    read anew and a file that became unreadable is an error, never the old scenarios."""
    rec = {"sample_id": 1, "ambiguous_question": "q", "annotations": [{"long_answer": "a", "knowledge": []}]}
    path = _write_jsonl(tmp_path / "a.jsonl", [json.dumps(rec)])
    first = load_scenarios("asqa", path=path)
    assert load_scenarios("asqa", path=path) == first and len(first) == 1
    _write_jsonl(path, [json.dumps(rec), json.dumps({**rec, "sample_id": 2})])
    assert [s.scenario_id for s in load_scenarios("asqa", path=path)] == ["asqa_1", "asqa_2"]
    path.unlink()
    with pytest.raises(DatasetError, match=r"a\.jsonl: cannot read it"):
        load_scenarios("asqa", path=path)
