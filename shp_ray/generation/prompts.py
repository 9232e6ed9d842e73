"""Versioned prompts of the Writer, the Critic and the LLM judge.

Both agents are grounded on the contexts C. The role markers are a protocol
that the simulated server (``shp-serve``) relies on too: the Writer's system
message contains "You are the Writer", the Critic's "You are the Critic", the
judge's "You are the judge"; writer and critic user messages carry a line
``Round: <t>``; the Critic approves by starting its reply with "APPROVED".

Changing any text here changes the drafts: bump PROMPT_VERSION (it is part of
gen_id) or JUDGE_PROMPT_VERSION (part of every judge key).
"""

from __future__ import annotations

from collections.abc import Sequence

PROMPT_VERSION = "shp-wc-v1"
JUDGE_PROMPT_VERSION = "shp-judge-v1"

NO_CONTEXTS = "(no contexts were provided for this question)"

WRITER_SYSTEM = (
    "You are the Writer. Answer the question using only the numbered contexts. "
    "Be concise and factual. When a previous draft and the Critic's feedback are given, "
    "revise the draft to address the feedback. Reply with the answer only."
)
CRITIC_SYSTEM = (
    "You are the Critic. Check the draft against the question and the numbered contexts. "
    "If the draft is correct, complete and supported by the contexts, reply with APPROVED "
    "as the first word. Otherwise list the concrete problems and how to fix them, briefly."
)
JUDGE_SYSTEM = (
    "You are the judge. Score the answer on four metrics, each a number in [0, 1]: "
    "faithfulness (claims supported by the contexts), answer_relevancy (addresses the question), "
    "context_precision (the contexts relevant to the question rank first), context_recall "
    "(the reference answer is supported by the contexts). Reply with ONE JSON object and nothing "
    'else, exactly these keys: {"faithfulness": x, "answer_relevancy": x, '
    '"context_precision": x, "context_recall": x}'
)
JUDGE_RETRY = (
    "Your previous reply was not one JSON object with the four metrics in [0, 1]. "
    "Reply again with only that JSON object."
)

Messages = tuple[tuple[str, str], ...]


def format_contexts(contexts: Sequence[str]) -> str:
    if not contexts:
        return NO_CONTEXTS
    return "\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, start=1))


def writer_messages(question: str, contexts: Sequence[str], t: int, previous_draft: str, feedback: str) -> Messages:
    """Writer(q, C, x_{t-1}, f_{t-1}) at round t; x_0 = f_0 = ""."""
    parts = [f"Round: {t}", f"Question: {question}", "Contexts:", format_contexts(contexts)]
    if t > 1:
        parts += ["Previous draft:", previous_draft or "(empty)", "Critic feedback:", feedback or "(none)"]
    parts.append("Write the answer.")
    return (("system", WRITER_SYSTEM), ("user", "\n".join(parts)))


def critic_messages(question: str, contexts: Sequence[str], t: int, draft: str) -> Messages:
    """Critic(q, C, x_t) at round t."""
    parts = [
        f"Round: {t}",
        f"Question: {question}",
        "Contexts:",
        format_contexts(contexts),
        "Draft:",
        draft or "(empty)",
    ]
    return (("system", CRITIC_SYSTEM), ("user", "\n".join(parts)))


def judge_messages(question: str, contexts: Sequence[str], ground_truth: str, draft: str, attempt: int = 1) -> Messages:
    """The LLM judge's request; a retry after an unparsable reply differs (so no cache hit repeats it)."""
    user = "\n".join(
        [
            f"Question: {question}",
            "Contexts:",
            format_contexts(contexts),
            f"Reference answer: {ground_truth or '(none)'}",
            "Answer to score:",
            draft or "(empty)",
        ]
    )
    msgs: list[tuple[str, str]] = [("system", JUDGE_SYSTEM), ("user", user)]
    for _ in range(attempt - 1):
        msgs.append(("user", JUDGE_RETRY))
    return tuple(msgs)
