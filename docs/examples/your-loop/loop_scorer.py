"""A scorer of your own: ``--score python:loop_scorer:score`` (shp-import) or
``score=python score.target=loop_scorer:score`` (shp-sweep), with this folder on PYTHONPATH.

It is called once per stored draft with the task (``task.scenario_id``, ``task.question``, ``task.answers``,
``task.meta``) and the draft's text, and returns {score name: number}. What it raises is recorded for that
round (the value is NULL, the error kept) and the run goes on.
"""


def score(task, draft):
    """right: the draft's last "Answer:" line names a gold answer; words: the draft's length in words."""
    lines = [line for line in draft.splitlines() if line.lower().startswith("answer:")]
    if not lines:
        raise ValueError("the draft has no 'Answer:' line")
    answer = lines[-1].split(":", 1)[1].strip().rstrip(".").lower()
    return {"right": float(any(answer == gold.lower() for gold in task.answers)), "words": float(len(draft.split()))}
