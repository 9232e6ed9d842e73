"""Short tasks for tests that drive the real embedded model: a HotpotQA prompt is ~600 tokens (5-10 s a call
on the tiny model with two threads), one of these ~150; the code under test is the same (``dataset=file``)."""

from __future__ import annotations

import json
from pathlib import Path

FACTS = [
    ("paris", "What is the capital of France?", "Paris is the capital of France.", "Paris"),
    ("tokyo", "What is the capital of Japan?", "Tokyo is the capital of Japan.", "Tokyo"),
    ("water", "Which two elements make up water?", "Water is hydrogen and oxygen.", "hydrogen and oxygen"),
    ("moon", "Who first walked on the Moon?", "Neil Armstrong walked on the Moon in 1969.", "Neil Armstrong"),
    ("nile", "Which river flows through Cairo?", "The Nile flows through Cairo.", "the Nile"),
    ("gold", "What is the chemical symbol of gold?", "Gold has the symbol Au.", "Au"),
]


def short_tasks(folder: Path, n: int = 4) -> list[str]:
    """Write ``n`` one-context tasks (all in the test split) to ``folder/tasks.jsonl``; the sweep overrides that
    read them."""
    path = folder / "tasks.jsonl"
    rows = [{"id": i, "question": q, "contexts": [c], "answers": [a], "split": "test"} for i, q, c, a in FACTS[:n]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ["dataset=file", f"dataset.path={path}", "dataset.fields.split=split"]
