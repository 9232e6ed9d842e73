"""One conversation's text never reaches another's reply on the shared embedded server.

llama-server's cross-slot RAM prompt cache (``--cache-ram``), under concurrent requests, restored a
finished conversation's state into a slot serving another one: the reply continued the other
conversation (a HumanEval draft of one task went on with another task's function). The embedded server
runs with that cache off; this test drives the server the way a sweep does -- several trajectories at
once, each round's prompt carrying the previous draft, each trajectory pinned to its slot -- and checks
every reply for the names of the other trajectories' subjects. With ``--cache-ram 3072`` this workload
put a foreign name in 4 of 48 replies (BENCHMARKS.md, "Isolation"); it must put none.
"""

from __future__ import annotations

import asyncio

from shp_ray.providers.base import ChatRequest
from shp_ray.providers.registry import make_provider

# Invented names: a reply mentions one only if its own prompt, or a leak, put it there.
SUBJECTS = ("Zorblax", "Quindle", "Vartoon", "Plimsey", "Droxel", "Yantrik", "Fembrel", "Kloopar", "Snarvel", "Tazzino")
ROUNDS = 3


def writer_call(alias: str, subject: str, t: int, draft: str) -> ChatRequest:
    system = f"You are the Writer. You write about the imaginary animal called the {subject}. " + (
        f"The {subject} is small and blue. The {subject} eats moss. " * 8
    )
    ask = f"Round {t}. Previous draft: {draft}\nWrite a better paragraph." if draft else "Write a paragraph."
    return ChatRequest(
        alias, (("system", system), ("user", ask)), max_tokens=32, temperature=0.0, seed=3, affinity=f"{subject}/writer"
    )


def test_concurrent_trajectories_never_see_each_others_text(embedded_llm):
    server = embedded_llm()
    assert server.parallel >= 2  # the slots are shared: the case that leaked

    async def trajectory(provider, subject: str) -> list[str]:
        draft, drafts = "", []
        for t in range(1, ROUNDS + 1):
            draft = (await provider.complete(writer_call(server.alias, subject, t, draft))).content
            drafts.append(draft)
        return drafts

    async def run() -> list[list[str]]:
        async with make_provider(server.spec()) as provider:
            return await asyncio.gather(*(trajectory(provider, s) for s in SUBJECTS))

    replies = asyncio.run(run())
    leaks = [
        (subject, t + 1, other, text[:120])
        for subject, drafts in zip(SUBJECTS, replies, strict=True)
        for t, text in enumerate(drafts)
        for other in SUBJECTS
        if other != subject and other.lower() in text.lower()
    ]
    assert all(text for drafts in replies for text in drafts)
    assert leaks == []
