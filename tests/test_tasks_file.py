"""dataset=file: a user's tasks in JSONL, CSV or Parquet with their own column names, checked whole."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shp_ray.generation.datasets import DatasetError, split_of
from shp_ray.generation.tasks_file import MIN_TASKS_TO_HASH, FieldMap, TasksFile, load_tasks
from tests.s3_support import moto, s3  # noqa: F401  (fixtures)

FIELDS = FieldMap(id="qid", question="prompt_text", contexts="passages", answers="gold")
ROWS = [
    {"qid": "a1", "prompt_text": "Who wrote Hamlet?", "passages": ["Shakespeare wrote Hamlet."], "gold": "Shakespeare",
     "topic": "literature"},
    {"qid": "a2", "prompt_text": "Capital of Japan?", "passages": ["Tokyo is the capital."], "gold": ["Tokyo", "TYO"],
     "topic": "geography"},
    {"qid": 7, "prompt_text": "2 + 2?", "passages": "Two and two make four.", "gold": "4", "topic": "maths"},
]  # fmt: skip


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def tasks(path: Path, fields: FieldMap = FIELDS, needed: tuple[str, ...] = ()):
    return load_tasks(TasksFile(str(path), fields), needed)


def test_jsonl_with_its_own_column_names_and_metadata(tmp_path):
    got = tasks(write_jsonl(tmp_path / "t.jsonl", ROWS), needed=("topic",))
    a1, a2, seven = got.scenarios
    assert (a1.scenario_id, a1.question, a1.contexts, a1.ground_truth) == (
        "a1", "Who wrote Hamlet?", ("Shakespeare wrote Hamlet.",), "Shakespeare",
    )  # fmt: skip
    assert a2.references == ("Tokyo", "TYO") and a2.ground_truth == "Tokyo"  # a list of answers: the first is gold
    assert seven.scenario_id == "7" and seven.contexts == ("Two and two make four.",)  # one string: one context
    assert [s.meta for s in got.scenarios] == [{"topic": "literature"}, {"topic": "geography"}, {"topic": "maths"}]
    assert all(s.dataset == "file" for s in got.scenarios) and got.columns[:2] == ("qid", "prompt_text")


def test_csv_and_parquet_give_the_tasks_jsonl_gives(tmp_path):
    def first(v: str | list[str]) -> str:
        return v if isinstance(v, str) else v[0]

    flat = [{**r, "qid": str(r["qid"]), "passages": first(r["passages"]), "gold": first(r["gold"])} for r in ROWS]
    with open(tmp_path / "t.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(flat[0]))
        w.writeheader()
        w.writerows(flat)
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "t.parquet")
    reference = tasks(write_jsonl(tmp_path / "t.jsonl", flat)).scenarios
    assert tasks(tmp_path / "t.csv").scenarios == reference
    assert tasks(tmp_path / "t.parquet").scenarios == reference
    nested = tmp_path / "lists.parquet"  # Parquet keeps lists: several contexts and answers per task
    listed = [{**r, "gold": r["gold"] if isinstance(r["gold"], list) else [r["gold"]]} for r in ROWS[:2]]
    pq.write_table(pa.Table.from_pylist(listed), nested)
    assert tasks(nested).scenarios == tasks(write_jsonl(tmp_path / "l.jsonl", listed)).scenarios


def _bad(rows: list, line: int, change: dict | None = None, raw: str | None = None) -> list:
    out = [json.dumps(r) for r in rows]
    out[line - 1] = raw if raw is not None else json.dumps({**rows[line - 1], **(change or {})})
    return out


BAD_JSONL = {
    "not JSON": (_bad(ROWS, 2, raw='{"qid": "a2", "prompt_text": '), 2, r"not valid JSON"),
    "not an object": (_bad(ROWS, 3, raw="[1, 2]"), 3, r"expected a JSON object"),
    "missing question": (_bad([*ROWS[:1], {"qid": "z"}], 2, {}), 2, r"field 'prompt_text' is missing"),
    "question of the wrong type": (_bad(ROWS, 1, {"prompt_text": 42}), 1, r"field 'prompt_text' should be a non-empty"),
    "a context that is no string": (_bad(ROWS, 2, {"passages": ["ok", 3]}), 2, r"field 'passages' should be a string"),
    "answers of the wrong type": (_bad(ROWS, 3, {"gold": {"x": 1}}), 3, r"field 'gold' should be a string or a list"),
    "id of the wrong type": (
        _bad(ROWS, 1, {"qid": True}),
        1,
        r"field 'qid' should be a non-empty string or an integer",
    ),
    "duplicate id": (_bad(ROWS, 3, {"qid": "a1"}), 3, r"field 'qid': duplicate id 'a1' \(first at line 1\)"),
    # JSON may escape a lone surrogate; no prompt, request or Parquet part can encode it: refused before any call
    "a lone surrogate": (
        _bad(ROWS, 2, raw='{"qid": "a2", "prompt_text": "Capital of \\ud800 Japan?"}'),
        2,
        r"text UTF-8 cannot encode \(a lone surrogate\) in prompt_text: '\\ud800' at character 11",
    ),
}


def test_jsonl_is_split_on_newlines_only(tmp_path):
    """U+2028, U+2029, U+0085 and a form feed are valid inside a JSON string (str.splitlines would cut there)."""
    odd = "Line\u2028sep\u2029par\x85nel\x0cff"
    rows = [{**ROWS[0], "prompt_text": odd}, ROWS[1]]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows), encoding="utf-8")
    first, second = tasks(path).scenarios
    assert first.question == odd and second.scenario_id == "a2"


@pytest.mark.parametrize("name", list(BAD_JSONL))
def test_a_bad_line_is_one_error_naming_file_line_and_field(tmp_path, name):
    lines, line, said = BAD_JSONL[name]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        tasks(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert re.search(said, str(err.value)) and "\n" not in str(err.value)


def test_csv_errors_name_the_files_own_line(tmp_path):
    path = tmp_path / "t.csv"
    # a quoted cell over two lines: the next record starts on line 4
    path.write_text('qid,prompt_text,passages,gold\na,"two\nlines",p,g\nb,,p,g\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{path}:4: field 'prompt_text' should be a non-empty string"):
        tasks(path)
    path.write_text("qid,prompt_text,passages,gold\na,q,p,g\nb,q,p,g,extra\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{path}:3: more cells than the header"):
        tasks(path)
    path.write_text("qid,prompt_text,passages\na,q,p\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{path}:2: field 'gold' is missing"):
        tasks(path)


def test_a_parquet_error_names_the_row(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist([{"qid": "a", "prompt_text": "q"}, {"qid": "a", "prompt_text": "r"}]), path)
    with pytest.raises(DatasetError, match=rf"^{path}:2: field 'qid': duplicate id 'a'"):
        tasks(path, FieldMap(id="qid", question="prompt_text", contexts=None, answers=None))


def test_split_from_a_column_or_by_the_documented_hash(tmp_path):
    rows = [{**r, "part": s} for r, s in zip(ROWS, ("dev", "test", "dev"), strict=True)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    by_column = tasks(path, FieldMap(**{**FIELDS.__dict__, "split": "part"}))
    assert [s.split for s in by_column.scenarios] == ["dev", "test", "dev"]
    assert all("part" not in s.meta for s in by_column.scenarios)  # a mapped column is no metadata
    # no split column, fewer than MIN_TASKS_TO_HASH tasks: all test (a hashed quarter of 3 is no dev table)
    assert [s.split for s in tasks(path).scenarios] == ["test"] * 3
    many = [{**ROWS[0], "qid": f"q{i}"} for i in range(MIN_TASKS_TO_HASH)]
    hashed = tasks(write_jsonl(tmp_path / "many.jsonl", many)).scenarios
    for s in hashed:  # the rule the docs state: sha256("split:" + id), 15 hex digits, mod 10000
        rank = int(hashlib.sha256(f"split:{s.scenario_id}".encode()).hexdigest()[:15], 16) % 10_000
        assert s.split == ("dev" if rank < 2500 else "test") == split_of(s.scenario_id)
    assert {s.split for s in hashed} == {"dev", "test"}
    write_jsonl(path, [{**rows[0], "part": "train"}])
    with pytest.raises(DatasetError, match=rf"^{path}:1: field 'part' should be one of \['dev', 'test'\] \(map"):
        tasks(path, FieldMap(**{**FIELDS.__dict__, "split": "part"}))


def test_a_split_map_names_the_files_own_splits(tmp_path):
    rows = [{**r, "part": s} for r, s in zip(ROWS, ("train", "eval", "dev"), strict=True)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    fields = FieldMap(**{**FIELDS.__dict__, "split": "part"})
    mapped = load_tasks(TasksFile(str(path), fields, (("eval", "test"), ("train", "dev"))))
    assert [s.split for s in mapped.scenarios] == ["dev", "test", "dev"]  # "dev" is dev without a mapping
    assert mapped.identity != load_tasks(TasksFile(str(path), fields, (("eval", "dev"), ("train", "test")))).identity
    with pytest.raises(DatasetError, match=r":1: field 'part' should be one of \['dev', 'test'\] or a key of "):
        load_tasks(TasksFile(str(path), fields, (("eval", "test"),)))


def test_identity_is_the_files_bytes_and_the_mapping(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", ROWS)
    first = tasks(path).identity
    assert tasks(path).identity == first  # the same file resumes its generation
    assert tasks(path, FieldMap(**{**FIELDS.__dict__, "answers": None})).identity != first
    write_jsonl(path, [ROWS[0], {**ROWS[1], "prompt_text": "Capital city of Japan?"}, ROWS[2]])
    assert tasks(path).identity != first  # an edited file is a new generation


def test_a_placeholder_needs_a_metadata_column(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", ROWS)
    with pytest.raises(DatasetError, match=r"uses \{level\}, which names no metadata column.*\['topic'\]"):
        tasks(path, needed=("level",))
    with pytest.raises(DatasetError, match=r"uses \{gold\}"):  # a mapped column is a core field, not metadata
        tasks(path, needed=("gold",))
    write_jsonl(path, [ROWS[0], {k: v for k, v in ROWS[1].items() if k != "topic"}])
    with pytest.raises(DatasetError, match=rf"^{path}:2: field 'topic' is missing \(a prompt template uses"):
        tasks(path, needed=("topic",))


def test_unreadable_files_are_one_line(tmp_path):
    with pytest.raises(DatasetError, match=r"unknown tasks file type '.txt'"):
        tasks(tmp_path / "t.txt")
    with pytest.raises(DatasetError, match=r"cannot read the tasks file \(FileNotFoundError"):
        tasks(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"no tasks in the file"):
        tasks(tmp_path / "empty.jsonl")


def test_a_tasks_file_on_s3_is_read_like_a_local_one(s3, tmp_path):  # noqa: F811
    fs, bucket = s3
    local = write_jsonl(tmp_path / "t.jsonl", ROWS)
    with fs.open_output_stream(f"{bucket}/in/t.jsonl") as out:
        out.write(local.read_bytes())
    remote = load_tasks(TasksFile(f"s3://{bucket}/in/t.jsonl", FIELDS))
    assert remote.scenarios == tasks(local).scenarios and remote.identity == tasks(local).identity
    with pytest.raises(DatasetError, match=rf"s3://{bucket}/in/none.jsonl: cannot read"):
        load_tasks(TasksFile(f"s3://{bucket}/in/none.jsonl", FIELDS))
