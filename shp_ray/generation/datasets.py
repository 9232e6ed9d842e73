"""Scenario builders over the real data shipped in ``shp_ray/data`` (see its ATTRIBUTION.md).

- ``hotpotqa``:  HotpotQA distractor dev -> question, ~4 contexts (every gold
  paragraph plus distractors, chosen deterministically), short ground truth.
- ``shp_paper``: the SHP paper's frozen 80-scenario split (20 dev / 60 test), as is.
- ``asqa``:      ASQA dev -> ambiguous question, evidence passages, reference long answers.

dev/test is assigned by hashing the id (except ``shp_paper``, which keeps its
own split): a task is ``dev`` when the first 15 hex digits of sha256("split:" + id), as an
integer, modulo 10000 are below 2500 (``DEV_FRACTION`` = 0.25), else ``test``. A user's own
tasks file (``dataset=file``) is read by :mod:`shp_ray.generation.tasks_file`.
A malformed record raises :class:`DatasetError` naming the file and line; a loader returns all
scenarios or raises, never a partial list.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

DATASETS = ("hotpotqa", "shp_paper", "asqa")
SPLITS = ("dev", "test")
DEV_FRACTION = 0.25  # the paper's 20 dev / 60 test proportion
N_CONTEXTS = 4


class DatasetError(ValueError):
    """A malformed data record; the message says which file and line."""


@dataclass(frozen=True)
class Scenario:
    scenario_id: str
    dataset: str
    split: str
    question: str
    contexts: tuple[str, ...]
    ground_truth: str
    references: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    epoch: int = 1  # which of the task's independent trajectories (generation.epochs) this scenario is
    task_id: str = ""  # the task's own id ("" = scenario_id: epoch 1 keeps the task's id as its scenario id)

    @property
    def task(self) -> str:
        """The task this scenario is one epoch of: what statistics cluster by."""
        return self.task_id or self.scenario_id


EPOCH_MARK = "#e"  # epoch e > 1 of task <id> is scenario <id>#e<e>


def with_epochs(scenarios: Iterable[Scenario], epochs: int) -> list[Scenario]:
    """Each task ``epochs`` times, task by task: epoch 1 as it is (its scenario id, so its stored trajectories and
    gen_id stay what they were), epoch e > 1 as scenario ``<id>#e<e>`` -- the same task, another trajectory."""
    out = []
    for s in scenarios:
        out.append(s)
        out += [replace(s, scenario_id=f"{s.scenario_id}{EPOCH_MARK}{e}", epoch=e, task_id=s.scenario_id)
                for e in range(2, epochs + 1)]  # fmt: skip
    return out


def _data_file(name: str) -> Path:
    return Path(str(resources.files("shp_ray") / "data" / name))


def _stable_int(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


def split_of(item_id: str, dev_fraction: float = DEV_FRACTION) -> str:
    """Deterministic dev/test assignment by hashing the id."""
    return "dev" if _stable_int(f"split:{item_id}") % 10_000 < dev_fraction * 10_000 else "test"


def unencodable(value: object, path: str = "") -> str | None:
    """Where ``value`` holds text that UTF-8 cannot encode (a lone surrogate such as JSON's ``"\\ud800"``), said
    as ``key[i].key: '\\ud800' at character N``; None when every string in it can be encoded (as every prompt,
    request and Parquet part will encode it)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{path or 'value'}: {exc.object[exc.start : exc.end]!r} at character {exc.start}"
        return None
    if isinstance(value, dict):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        label = f"{path}{key}" if str(key).startswith("[") else f"{path}.{key}" if path else str(key)
        found = unencodable(key, f"{label} (the key)") or unencodable(item, label)
        if found:
            return found
    return None


def split_lines(text: str) -> list[str]:
    """JSON Lines split on ``\\n`` only (a ``\\r`` before it dropped): U+2028, U+0085 or a form feed inside a
    string are the string's (``str.splitlines`` would cut the record there)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def json_records(lines: Iterable[str], shown: object) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank JSON line; a line that is no JSON object, or holds text UTF-8
    cannot encode, names ``shown:line``."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{shown}:{lineno}: not valid JSON ({exc.msg}, column {exc.colno})") from None
        if not isinstance(record, dict):
            raise DatasetError(f"{shown}:{lineno}: expected a JSON object, got {type(record).__name__}")
        bad = unencodable(record)
        if bad:
            raise DatasetError(f"{shown}:{lineno}: text UTF-8 cannot encode (a lone surrogate) in {bad}")
        yield lineno, record


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        yield from json_records(fh, path)


def _field(record: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in record:
        raise DatasetError(f"{where}: missing field {key!r}")
    value = record[key]
    if not isinstance(value, kind):
        raise DatasetError(f"{where}: field {key!r} should be {kind}, got {type(value).__name__}")
    return value


def _hotpot_scenario(record: dict[str, Any], where: str, dev_fraction: float) -> Scenario:
    item_id = _field(record, "_id", str, where)
    context = _field(record, "context", list, where)
    paragraphs: dict[str, str] = {}
    for entry in context:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
            raise DatasetError(f"{where}: each context entry must be [title, [sentence, ...]]")
        title, sentences = entry
        paragraphs[str(title)] = " ".join(str(s).strip() for s in sentences).strip()
    gold_titles = []
    for fact in _field(record, "supporting_facts", list, where):
        if not (isinstance(fact, list) and fact and isinstance(fact[0], str)):
            raise DatasetError(f"{where}: each supporting fact must be [title, sentence_id]")
        if fact[0] in paragraphs and fact[0] not in gold_titles:
            gold_titles.append(fact[0])
    if not gold_titles:
        raise DatasetError(f"{where}: no supporting paragraph found among the contexts")
    distractors = sorted((t for t in paragraphs if t not in gold_titles), key=lambda t: _stable_int(f"{item_id}:{t}"))
    chosen = gold_titles + distractors[: max(0, N_CONTEXTS - len(gold_titles))]
    chosen.sort(key=lambda t: _stable_int(f"order:{item_id}:{t}"))  # gold not always first
    answer = str(_field(record, "answer", str, where))
    return Scenario(
        scenario_id=f"hotpot_{item_id}",
        dataset="hotpotqa",
        split=split_of(item_id, dev_fraction),
        question=_field(record, "question", str, where),
        contexts=tuple(paragraphs[t] for t in chosen),
        ground_truth=answer,
        references=(answer,),
        meta={"type": record.get("type"), "level": record.get("level"), "titles": chosen, "n_gold": len(gold_titles)},
    )


def _asqa_scenario(record: dict[str, Any], where: str, dev_fraction: float) -> Scenario:
    sample_id = str(_field(record, "sample_id", (int, str), where))
    annotations = _field(record, "annotations", list, where)
    answers: list[str] = []
    passages: list[str] = []
    for note in annotations:
        if not isinstance(note, dict):
            raise DatasetError(f"{where}: each annotation must be an object")
        answers.append(str(_field(note, "long_answer", str, where)))
        for k in note.get("knowledge") or []:
            text = str(k.get("content", "")).strip() if isinstance(k, dict) else ""
            if text and text not in passages:
                passages.append(text)
    if not answers:
        raise DatasetError(f"{where}: no annotation with a long_answer")
    return Scenario(
        scenario_id=f"asqa_{sample_id}",
        dataset="asqa",
        split=split_of(sample_id, dev_fraction),
        question=_field(record, "ambiguous_question", str, where),
        contexts=tuple(passages),
        ground_truth=answers[0],
        references=tuple(answers),
        meta={"qa_pairs": len(record.get("qa_pairs") or [])},
    )


def _shp_paper(path: Path) -> list[Scenario]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(records, list):
        raise DatasetError(f"{path}: expected a JSON list of scenarios")
    out = []
    for i, rec in enumerate(records):
        where = f"{path}: record {i}"
        if not isinstance(rec, dict):
            raise DatasetError(f"{where}: expected an object")
        contexts = _field(rec, "contexts", list, where)
        split = _field(rec, "split", str, where)
        if split not in SPLITS:
            raise DatasetError(f"{where}: split must be one of {SPLITS}, got {split!r}")
        truth = _field(rec, "ground_truth", str, where)
        out.append(
            Scenario(
                scenario_id=_field(rec, "id", str, where),
                dataset="shp_paper",
                split=split,
                question=_field(rec, "question", str, where),
                contexts=tuple(str(c) for c in contexts),
                ground_truth=truth,
                references=(truth,),
                meta=dict(rec.get("meta") or {}),
            )
        )
    return out


_FILES = {
    "hotpotqa": "hotpotqa_dev_distractor.jsonl.gz",
    "asqa": "asqa_dev.jsonl.gz",
    "shp_paper": "shp_paper_scenarios.json",
}
_BUILDERS = {"hotpotqa": _hotpot_scenario, "asqa": _asqa_scenario}


def load_scenarios(
    dataset: str,
    split: str | None = None,
    limit: int | None = None,
    path: str | Path | None = None,
    dev_fraction: float = DEV_FRACTION,
) -> list[Scenario]:
    """All scenarios of a dataset (optionally one split, the first ``limit``), or an error.

    ``path`` overrides the shipped file (same format).
    """
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {list(DATASETS)}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {list(SPLITS)} (or none for both)")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    file = Path(path) if path is not None else _data_file(_FILES[dataset])
    try:
        stat = file.stat()
    except OSError as exc:
        raise DatasetError(f"{file}: cannot read it ({exc.strerror})") from None
    return select(_parsed(dataset, str(file), stat.st_mtime_ns, stat.st_size, dev_fraction), split, limit)


@functools.lru_cache(maxsize=8)
def _parsed(dataset: str, file: str, mtime_ns: int, size: int, dev_fraction: float) -> tuple[Scenario, ...]:
    """Every scenario of one version of a file (its mtime and size are part of the key): a sweep job reads its
    dataset more than once (the test split, the dev split of a gain fit), and HotpotQA's file takes ~0.5 s."""
    if dataset == "shp_paper":
        scenarios = _shp_paper(Path(file))
    else:
        build = _BUILDERS[dataset]
        scenarios = [build(rec, f"{file}:{lineno}", dev_fraction) for lineno, rec in _jsonl(Path(file))]
    seen: set[str] = set()
    for s in scenarios:
        if s.scenario_id in seen:
            raise DatasetError(f"{file}: duplicate scenario id {s.scenario_id!r}")
        seen.add(s.scenario_id)
    return tuple(scenarios)


def select(scenarios: Iterable[Scenario], split: str | None, limit: int | None) -> list[Scenario]:
    """The scenarios of one split (None: both), the first ``limit`` of them (None: all)."""
    chosen = [s for s in scenarios if split is None or s.split == split]
    return chosen if limit is None else chosen[:limit]
