"""Versioned prompts of the Writer, the Critic and the LLM judge.

Both agents are grounded on the contexts C. The role markers are a protocol
that the simulated server (``shp-serve``) relies on too: the Writer's system
message contains "You are the Writer", the Critic's "You are the Critic", the
judge's "You are the judge"; writer and critic user messages carry a line
``Round: <t>``; the Critic approves by starting its reply with "APPROVED".

Prompt sets are versioned and kept: ``generation.prompt_version`` (part of gen_id) chooses
one, so a store written with an older version regenerates with the same text. Changing a
set's text changes the drafts: add a new version instead. JUDGE_PROMPT_VERSION is part of
every judge key.

- ``shp-wc-v1``: a short answer, revised to the feedback.
- ``shp-wc-v2``: a grounded justification citing the contexts by number and a final
  ``Answer:`` line (the answer metrics read it); a Critic that approves only a fully supported
  answer and otherwise names concrete, checkable problems against the contexts. Written for
  small local models, which under v1 approved at round 1 and repeated their drafts verbatim.
- ``shp-wc-v3`` (default): v2 with drafts bounded in words and the question + contexts opening
  every request (the round after them), so a prompt-caching server evaluates that shared prefix
  once per question and role instead of once per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PROMPT_VERSION = "shp-wc-v3"
JUDGE_PROMPT_VERSION = "shp-judge-v1"

NO_CONTEXTS = "(no contexts were provided for this question)"


@dataclass(frozen=True)
class PromptSet:
    writer_system: str
    critic_system: str
    writer_task: str  # the last line of the Writer's round-1 request
    critic_task: str = ""  # the last line of every Critic request ("" = none)
    revise_task: str = ""  # the last line of the Writer's requests from round 2 ("" = writer_task)
    # Round >= 2: the feedback before the previous draft, so a model that copies the block right above
    # its task copies a draft, not the critique.
    feedback_first: bool = False
    # The question and contexts open every request, the round after them: all requests of one role on
    # one question then share one long prefix, which llama.cpp's prompt cache evaluates once, not per round.
    shared_prefix: bool = False


PROMPT_SETS: dict[str, PromptSet] = {
    "shp-wc-v1": PromptSet(
        writer_system=(
            "You are the Writer. Answer the question using only the numbered contexts. "
            "Be concise and factual. When a previous draft and the Critic's feedback are given, "
            "revise the draft to address the feedback. Reply with the answer only."
        ),
        critic_system=(
            "You are the Critic. Check the draft against the question and the numbered contexts. "
            "If the draft is correct, complete and supported by the contexts, reply with APPROVED "
            "as the first word. Otherwise list the concrete problems and how to fix them, briefly."
        ),
        writer_task="Write the answer.",
    ),
    "shp-wc-v2": PromptSet(
        writer_system=(
            "You are the Writer. Answer the question using only the numbered contexts. "
            "In one to three sentences of your own, state the facts from the contexts that answer the question, "
            "citing each context you use by its number, like [2]; do not copy the contexts. "
            "Then end with a final line of the form 'Answer: <the short answer>' (a name, a date, a number, "
            "yes or no: a few words, nothing else). When a previous draft and the Critic's feedback are given, "
            "rewrite the draft: fix every problem the Critic names that the contexts confirm, and keep what "
            "the contexts support."
        ),
        critic_system=(
            "You are the Critic. Check the draft strictly against the question and the numbered contexts. "
            "Begin your reply with one of two words. APPROVED: only if the final 'Answer:' line answers exactly "
            "what the question asks and every claim in the draft is stated in the contexts. PROBLEMS: otherwise, "
            "followed by at most three concrete problems, each naming the context number that shows it "
            "(for example: 'Context [2] says X, but the draft says Y'), and what the answer should be."
        ),
        writer_task="Write the draft: a few sentences citing the contexts, then the final 'Answer:' line.",
        critic_task="Begin with APPROVED, or with PROBLEMS: and the list.",
        # Small models otherwise copy the request's layout, feedback included, into the new draft.
        revise_task=(
            "Write the revised draft only: a few sentences citing the contexts, then the final 'Answer:' line. "
            "Do not repeat the feedback."
        ),
        feedback_first=True,
    ),
    # Tuned on the dev split with Qwen2.5-Coder-1.5B (0.5B copied the contexts or its draft under every
    # wording tried): v2's drafts ran to the max_tokens cap, so v3 bounds them in words, and the
    # question + contexts open every request so llama.cpp evaluates them once per question and role.
    "shp-wc-v3": PromptSet(
        writer_system=(
            "You are the Writer. Answer the question using only the numbered contexts. "
            "In at most three short sentences of your own (under 70 words), state the facts from the contexts "
            "that answer the question, citing each context you use by its number, like [2]; do not copy the "
            "contexts. Then, on a line of its own, end with the final line 'Answer: <the short answer>' (a name, "
            "a date, a number, yes or no: a few words, nothing else). When a previous draft and the Critic's "
            "feedback are given, rewrite the draft: fix every problem the Critic names that the contexts "
            "confirm, and keep what the contexts support."
        ),
        critic_system=(
            "You are the Critic. Check the draft strictly against the question and the numbered contexts. "
            "Begin your reply with one of two words. APPROVED: only if the final 'Answer:' line answers exactly "
            "what the question asks and every claim in the draft is stated in the contexts. PROBLEMS: otherwise, "
            "followed by at most two concrete problems, one sentence each, each naming the context number that "
            "shows it (for example: 'Context [2] says X, but the draft says Y'), and what the answer should be."
        ),
        writer_task=(
            "Write the draft: at most three short sentences citing the contexts, then the final 'Answer:' line."
        ),
        critic_task="Begin with APPROVED, or with PROBLEMS: and the list.",
        revise_task=(
            "Write the revised draft only: at most three short sentences citing the contexts, then the final "
            "'Answer:' line on its own line. Do not repeat the feedback."
        ),
        feedback_first=True,
        shared_prefix=True,
    ),
}


def prompt_set(version: str = PROMPT_VERSION) -> PromptSet:
    try:
        return PROMPT_SETS[version]
    except KeyError:
        raise ValueError(f"unknown prompt version {version!r}; known: {sorted(PROMPT_SETS)}") from None


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


def _opening(ps: PromptSet, question: str, contexts: Sequence[str], t: int) -> list[str]:
    head = [f"Question: {question}", "Contexts:", format_contexts(contexts)]
    return [*head, f"Round: {t}"] if ps.shared_prefix else [f"Round: {t}", *head]


def writer_messages(
    question: str,
    contexts: Sequence[str],
    t: int,
    previous_draft: str,
    feedback: str,
    version: str = PROMPT_VERSION,
) -> Messages:
    """Writer(q, C, x_{t-1}, f_{t-1}) at round t; x_0 = f_0 = ""."""
    ps = prompt_set(version)
    parts = _opening(ps, question, contexts, t)
    if t > 1:
        draft_part = ["Previous draft:", previous_draft or "(empty)"]
        feedback_part = ["Critic feedback:", feedback or "(none)"]
        parts += feedback_part + draft_part if ps.feedback_first else draft_part + feedback_part
    parts.append(ps.revise_task if t > 1 and ps.revise_task else ps.writer_task)
    return (("system", ps.writer_system), ("user", "\n".join(parts)))


def critic_messages(
    question: str, contexts: Sequence[str], t: int, draft: str, version: str = PROMPT_VERSION
) -> Messages:
    """Critic(q, C, x_t) at round t."""
    ps = prompt_set(version)
    parts = [*_opening(ps, question, contexts, t), "Draft:", draft or "(empty)"]
    if ps.critic_task:
        parts.append(ps.critic_task)
    return (("system", ps.critic_system), ("user", "\n".join(parts)))


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
