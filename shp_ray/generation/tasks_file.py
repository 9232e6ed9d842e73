"""Tasks from the user's own file (``dataset=file``): JSONL, CSV or Parquet, a local path or ``s3://``.

``FieldMap`` names the file's own columns: ``id`` and ``question`` (required), ``contexts`` (a list
of strings, or one string = one context; null = the tasks have none), ``answers`` (a string or a
list of strings; the first is the gold answer the answer metrics read; null = none) and ``split``
(a column holding ``dev`` / ``test``, or names of the file's own that ``split_map`` maps to them). Every
other column is kept per scenario as metadata (stored with the scenario, usable in prompt templates).

A file with no split column: with at least :data:`MIN_TASKS_TO_HASH` tasks, a quarter is ``dev`` by hashing
the id (:func:`split_of`, the shipped datasets' rule); a smaller file is all ``test``, since a hashed quarter of
a dozen tasks is a dev table of one or two, which no statistic can read.

The whole file is read and checked before anything runs: a line that is not JSON, a missing mapped
field, a wrong type or a duplicate id raises one :class:`DatasetError` naming ``file:line`` and the
field (for CSV the file's line, header = line 1; for Parquet the row number, first row = 1).

:attr:`Tasks.identity` hashes the file's bytes and the field mapping: it enters gen_id, so the same
file resumes its generation and an edited file (or another mapping) is a new one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shp_ray.generation.datasets import (
    DEV_FRACTION,
    SPLITS,
    DatasetError,
    Scenario,
    json_records,
    split_lines,
    split_of,
)
from storage import objectstore

FILE_DATASET = "file"
MIN_TASKS_TO_HASH = 40  # a hashed quarter of 40 is ~10 dev tasks; below this a file without a split is all test
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class FieldMap:
    """Which column of the file holds each part of a task."""

    id: str = "id"
    question: str = "question"
    contexts: str | None = "contexts"
    answers: str | None = "answers"
    split: str | None = None  # None: dev/test by hashing the id


@dataclass(frozen=True)
class TasksFile:
    path: str  # a local path or s3://bucket/key
    fields: FieldMap = field(default_factory=FieldMap)
    split_map: tuple[tuple[str, str], ...] = ()  # the split column's own names -> dev | test, e.g. (("train", "dev"),)


@dataclass(frozen=True)
class Tasks:
    scenarios: tuple[Scenario, ...]
    identity: str  # sha256 over the file's bytes and the field mapping
    columns: tuple[str, ...]  # every column seen in the file


def file_format(path: str) -> str:
    suffix = Path(path.split("://", 1)[-1]).suffix.lower()
    if suffix not in FORMATS:
        raise DatasetError(f"{path}: unknown tasks file type {suffix or '(none)'!r}; use one of {sorted(FORMATS)}")
    return FORMATS[suffix]


def read_bytes(path: str) -> bytes:
    """The file's bytes, from the local disk or an object store (credentials from the environment only)."""
    try:
        if objectstore.is_object_store(path):
            fs, key = objectstore.filesystem(path)
            with fs.open_input_file(key) as fh:
                return fh.read()
        return Path(path).expanduser().read_bytes()
    except objectstore.ObjectStoreError as exc:
        raise DatasetError(str(exc)) from None
    except (OSError, ValueError) as exc:  # missing, a folder, unreadable, an unreachable bucket
        raise DatasetError(f"{path}: cannot read the tasks file ({type(exc).__name__}: {exc})") from None


def _jsonl_rows(data: bytes, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    return json_records(split_lines(_text(data, shown)), shown)


def _csv_rows(data: bytes, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(_text(data, shown), newline=""), restkey="\0extra")
    start = 2  # the header is line 1
    try:
        for row in reader:
            if "\0extra" in row:
                raise DatasetError(f"{shown}:{start}: more cells than the header has columns")
            yield start, {k: v for k, v in row.items() if v is not None}  # a short row: its last columns are missing
            start = reader.line_num + 1
    except csv.Error as exc:
        raise DatasetError(f"{shown}:{reader.line_num}: not valid CSV ({exc})") from None


def _parquet_rows(data: bytes, shown: str) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"{shown}: not a readable Parquet file ({exc})") from None
    for i, row in enumerate(table.to_pylist(), start=1):
        yield i, {k: v for k, v in row.items() if v is not None}


def _text(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DatasetError(f"{shown}:{line}: not UTF-8 text") from None


_READERS = {"jsonl": _jsonl_rows, "csv": _csv_rows, "parquet": _parquet_rows}


def _texts(value: Any, where: str, key: str) -> tuple[str, ...]:
    """A string (one item; "" = none) or a list of strings."""
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    got = type(value).__name__ if not isinstance(value, list) else "a list with a non-string item"
    raise DatasetError(f"{where}: field {key!r} should be a string or a list of strings, got {got}")


def _required(record: dict[str, Any], key: str, where: str) -> Any:
    if key not in record:
        raise DatasetError(f"{where}: field {key!r} is missing")
    return record[key]


def _mapped(fields: FieldMap) -> set[str | None]:
    return {fields.id, fields.question, fields.contexts, fields.answers, fields.split}


def _split(record: dict[str, Any], spec: TasksFile, where: str) -> str:
    """The task's split: its column's value, mapped by ``split_map`` (a value already dev / test stays)."""
    key = spec.fields.split
    assert key is not None
    value = _required(record, key, where)
    mapped = dict(spec.split_map)
    split = mapped.get(value, value) if isinstance(value, str) else value
    if split not in SPLITS:
        hint = (
            f" or a key of dataset.split_map {sorted(mapped)}"
            if mapped
            else " (map other names with dataset.split_map)"
        )
        raise DatasetError(f"{where}: field {key!r} should be one of {list(SPLITS)}{hint}, got {value!r}")
    return str(split)


def _scenario(record: dict[str, Any], spec: TasksFile, where: str, needed: Iterable[str], hashed: bool) -> Scenario:
    """One task; ``hashed``: with no split column, dev/test by hashing the id (else test)."""
    fields = spec.fields
    raw_id = _required(record, fields.id, where)
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or str(raw_id).strip() == "":
        raise DatasetError(f"{where}: field {fields.id!r} should be a non-empty string or an integer, got {raw_id!r}")
    question = _required(record, fields.question, where)
    if not isinstance(question, str) or not question.strip():
        got = type(question).__name__ if not isinstance(question, str) else "an empty string"
        raise DatasetError(f"{where}: field {fields.question!r} should be a non-empty string, got {got}")
    contexts, answers = (
        () if key is None else _texts(_required(record, key, where), where, key)
        for key in (fields.contexts, fields.answers)
    )
    if fields.split is None:
        split = split_of(str(raw_id), DEV_FRACTION) if hashed else "test"
    else:
        split = _split(record, spec, where)
    for name in needed:
        if name not in record:
            raise DatasetError(f"{where}: field {name!r} is missing (a prompt template uses {{{name}}})")
    mapped = _mapped(fields)
    return Scenario(
        scenario_id=str(raw_id),
        dataset=FILE_DATASET,
        split=split,
        question=question,
        contexts=contexts,
        ground_truth=answers[0] if answers else "",
        references=answers,
        meta={k: v for k, v in record.items() if k not in mapped},
    )


def load_tasks(spec: TasksFile, needed: Iterable[str] = ()) -> Tasks:
    """Every task of the file, checked whole, or a DatasetError naming ``file:line`` and the field.

    ``needed``: the metadata columns the prompt templates use; a task without one is refused too.
    """
    shown = spec.path
    fmt = file_format(shown)
    data = read_bytes(shown)
    records = list(_READERS[fmt](data, shown))
    columns = tuple(dict.fromkeys(k for _, record in records for k in record))
    mapped = _mapped(spec.fields)
    metadata = [c for c in columns if c not in mapped]  # a mapped column is a core field: {question}, ...
    needed = tuple(sorted(needed))
    for name in needed:
        if name not in metadata:
            raise DatasetError(
                f"{shown}: a prompt template uses {{{name}}}, which names no metadata column of the file "
                f"(metadata columns: {metadata}; the mapped ones are {{question}}, {{contexts}})"
            )
    scenarios: list[Scenario] = []
    first_seen: dict[str, int] = {}
    hashed = len(records) >= MIN_TASKS_TO_HASH
    for line, record in records:
        where = f"{shown}:{line}"
        scenario = _scenario(record, spec, where, needed, hashed)
        if scenario.scenario_id in first_seen:
            raise DatasetError(
                f"{where}: field {spec.fields.id!r}: duplicate id {scenario.scenario_id!r} "
                f"(first at line {first_seen[scenario.scenario_id]})"
            )
        first_seen[scenario.scenario_id] = line
        scenarios.append(scenario)
    if not scenarios:
        raise DatasetError(f"{shown}: no tasks in the file")
    parts: dict[str, object] = {"sha256": hashlib.sha256(data).hexdigest(), "fields": asdict(spec.fields)}
    if spec.split_map:  # how the splits are named: stores made without a map keep their generation
        parts["split_map"] = sorted(spec.split_map)
    if spec.fields.split is None and not hashed:  # the small-file rule (all test) is its own generation
        parts["split"] = f"test: fewer than {MIN_TASKS_TO_HASH} tasks"
    blob = json.dumps(parts, sort_keys=True)
    return Tasks(tuple(scenarios), hashlib.sha256(blob.encode()).hexdigest(), columns)
