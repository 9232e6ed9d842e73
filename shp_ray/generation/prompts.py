"""The prompts of the Writer, the Critic and the LLM judge: Writer and Critic as presets of templates.

A preset is a YAML file (the shipped ones: ``shp_ray/data/prompts/<name>.yaml``; a user's: a
``prompts/<name>.yaml`` in their Hydra ``--config-dir``) holding the Writer's system, user (round 1)
and revise (round >= 2) templates, the Critic's system and user templates, and the ``approval``
marker: a critique that starts with it (any case) approves the draft (the cascade's critic level).
Templates are rendered with :meth:`str.format_map` over named fields of the task:

- ``{question}``, ``{contexts}`` (numbered ``[1] ...``, one a line), ``{round}`` (t = 1, 2, ...);
- ``{draft}``: the previous draft in ``revise``, the draft under review in the Critic's ``user``;
  ``{feedback}``: the Critic's previous critique (``revise`` only);
- ``{test_report}``: the code loop's report of the draft under review on its visible tests (the Critic's
  templates with ``critic=llm_tests``; elsewhere a line saying no tests were run);
- any metadata column of a tasks file (``dataset=file``), as text.

A literal brace is written ``{{`` / ``}}``. A placeholder that names no field is refused before
anything runs (:func:`check_fields`), naming it.

The role markers are a protocol the simulated server (``shp-serve``) relies on: its Writer's
system message contains "You are the Writer", its Critic's "You are the Critic", the judge's
"You are the judge"; writer and critic user messages carry a line ``Round: <t>``.

A preset's identity is its name plus, unless its templates are exactly a shipped preset's, the
hash of its templates (:func:`identity`): it is part of gen_id, so an edited template is a new
generation and the shipped presets keep the ids of the stores written before presets existed.
Changing a shipped preset's text changes the drafts: add a new preset instead.

- ``shp-wc-v1``: a short answer, revised to the feedback.
- ``shp-wc-v2``: a grounded justification citing the contexts and a final ``Answer:`` line.
- ``shp-wc-v3`` (default): v2 with drafts bounded in words and the question + contexts opening
  every request, so a prompt-caching server evaluates that shared prefix once per question and role.
- ``code-v1``: the code loop (``dataset=humaneval``): the Writer writes the whole function, the Critic
  reviews it with its visible-test report in hand (``{test_report}``).

JUDGE_PROMPT_VERSION is part of every judge key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from shp_ray.policy.cascade import APPROVAL

PROMPT_VERSION = "shp-wc-v3"
JUDGE_PROMPT_VERSION = "shp-judge-v1"

NO_CONTEXTS = "(no contexts were provided for this question)"
# The fields every task has; a tasks file adds its metadata columns.
CORE_FIELDS = ("question", "contexts", "round", "draft", "feedback", "test_report")
NO_TEST_REPORT = "(no tests were run)"
# {config key under prompts: PromptSet field}, the order errors and hashes use.
TEMPLATE_KEYS = {
    "writer.system": "writer_system",
    "writer.user": "writer_user",
    "writer.revise": "revise",
    "critic.system": "critic_system",
    "critic.user": "critic_user",
}


class PromptError(ValueError):
    """A template that cannot be rendered; the message names the template's key and the placeholder."""


@dataclass(frozen=True)
class PromptSet:
    name: str
    writer_system: str
    writer_user: str  # the Writer's round-1 request
    revise: str  # the Writer's requests from round 2
    critic_system: str
    critic_user: str
    approval: str = APPROVAL  # a critique that starts with it (any case) approves

    def templates(self) -> dict[str, str]:
        return {key: getattr(self, attr) for key, attr in TEMPLATE_KEYS.items()}

    @property
    def digest(self) -> str:
        """The hash of what is rendered and how approval is read (the name is not in it)."""
        blob = json.dumps({**self.templates(), "approval": self.approval}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def identity(self) -> dict[str, str]:
        """This preset's part of gen_id: the name, plus the digest unless it is a shipped preset as shipped."""
        shipped = self.name in PRESETS and preset(self.name).digest == self.digest
        return {"prompt_version": self.name} if shipped else {"prompt_version": self.name, "prompts": self.digest}


def from_mapping(data: Mapping[str, Any]) -> PromptSet:
    """A preset from its YAML shape ({name, writer: {system, user, revise}, critic: {system, user}, approval}).

    ``name`` null: ``custom-<hash of the templates>``; ``approval`` absent: APPROVED."""
    values: dict[str, Any] = {}
    for key, attr in TEMPLATE_KEYS.items():
        role, part = key.split(".")
        value = (data.get(role) or {}).get(part)
        if not isinstance(value, str) or not value.strip():
            raise PromptError(f"prompts.{key}: must be a non-empty template text, got {value!r}")
        values[attr] = value
    approval = data.get("approval", APPROVAL)
    if not isinstance(approval, str) or not approval.strip() or approval != approval.strip():
        raise PromptError(f"prompts.approval: must be a non-empty word without surrounding spaces, got {approval!r}")
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise PromptError(f"prompts.name: must be a non-empty text naming the preset, or null, got {name!r}")
    ps = PromptSet(name=name or "custom", approval=approval, **values)
    if name is None:  # a preset without a name is named by its templates
        ps = replace(ps, name=f"custom-{ps.digest[:12]}")
    placeholders(ps)  # malformed braces fail here, not at the first call
    return ps


def _preset_dir() -> Path:
    return Path(str(resources.files("shp_ray") / "data" / "prompts"))


PRESETS = tuple(sorted(p.stem for p in _preset_dir().glob("*.yaml")))


@functools.cache
def preset(name: str = PROMPT_VERSION) -> PromptSet:
    """A shipped preset by name."""
    if name not in PRESETS:
        raise ValueError(f"unknown prompt version {name!r}; known: {list(PRESETS)}")
    return from_mapping(yaml.safe_load((_preset_dir() / f"{name}.yaml").read_text(encoding="utf-8")))


def prompt_set(version: str | PromptSet = PROMPT_VERSION) -> PromptSet:
    return version if isinstance(version, PromptSet) else preset(version)


def placeholders(ps: PromptSet) -> dict[str, set[str]]:
    """{template key: the field names it uses}; positional, indexed or formatted placeholders are refused."""
    out: dict[str, set[str]] = {}
    for key, text in ps.templates().items():
        names: set[str] = set()
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise PromptError(f"prompts.{key}: {exc} (write a literal brace as {{{{ or }}}})") from None
        for _, field_name, spec, conversion in parsed:
            if field_name is None:
                continue
            if not field_name.isidentifier() or spec or conversion:
                raise PromptError(
                    f"prompts.{key}: placeholder {{{field_name}{'!' + conversion if conversion else ''}"
                    f"{':' + spec if spec else ''}}} must be a plain field name such as {{question}}"
                )
            names.add(field_name)
        out[key] = names
    return out


def extra_fields(ps: PromptSet) -> set[str]:
    """The fields the templates use beyond the core ones (metadata columns of a tasks file)."""
    return {n for names in placeholders(ps).values() for n in names} - set(CORE_FIELDS)


def check_fields(ps: PromptSet, available: Sequence[str], where: str) -> None:
    """Refuse a placeholder that names none of ``available`` (the core fields are always there)."""
    known = set(CORE_FIELDS) | set(available)
    for key, names in placeholders(ps).items():
        for name in sorted(names - known):
            raise PromptError(
                f"prompts.{key}: placeholder {{{name}}} names no field of the task; known: {sorted(known)} ({where})"
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


def field_text(value: object) -> str:
    """A metadata value as prompt text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _fields(question: str, contexts: Sequence[str], t: int, meta: Mapping[str, object] | None) -> dict[str, str]:
    extra = {k: field_text(v) for k, v in (meta or {}).items() if k not in CORE_FIELDS}
    return {
        **extra,
        "question": question,
        "contexts": format_contexts(contexts),
        "round": str(t),
        "test_report": NO_TEST_REPORT,
    }


def writer_messages(
    question: str,
    contexts: Sequence[str],
    t: int,
    previous_draft: str,
    feedback: str,
    prompts: str | PromptSet = PROMPT_VERSION,
    meta: Mapping[str, object] | None = None,
) -> Messages:
    """Writer(q, C, x_{t-1}, f_{t-1}) at round t; x_0 = f_0 = ""."""
    ps = prompt_set(prompts)
    fields = _fields(question, contexts, t, meta)
    if t > 1:
        user = ps.revise.format_map({**fields, "draft": previous_draft or "(empty)", "feedback": feedback or "(none)"})
    else:
        user = ps.writer_user.format_map({**fields, "draft": "(empty)", "feedback": "(none)"})
    return (("system", ps.writer_system.format_map(fields | {"draft": "", "feedback": ""})), ("user", user))


def critic_messages(
    question: str,
    contexts: Sequence[str],
    t: int,
    draft: str,
    prompts: str | PromptSet = PROMPT_VERSION,
    meta: Mapping[str, object] | None = None,
    test_report: str = "",
) -> Messages:
    """Critic(q, C, x_t) at round t (``test_report``: x_t's visible-test report, the code loop's llm_tests)."""
    ps = prompt_set(prompts)
    fields = {**_fields(question, contexts, t, meta), "draft": draft or "(empty)", "feedback": "(none)"}
    if test_report:
        fields["test_report"] = test_report
    return (("system", ps.critic_system.format_map(fields)), ("user", ps.critic_user.format_map(fields)))


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
