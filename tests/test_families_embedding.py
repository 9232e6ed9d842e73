"""Text cleaning before embedding, with the REAL model (all-MiniLM-L6-v2, loaded once per module).

A Writer that repeats a header on every revision makes two entirely different
answers look alike: the shared boilerplate dominates a short draft's embedding.
"""

from __future__ import annotations

import pytest

from shp_ray import Stopper
from shp_ray.generation.embedder import Embedder
from shp_ray.policy.families import clean_text
from shp_ray.policy.scoring import cosine_distance

HEADER = "Here is the improved answer, revised after carefully considering every point of the critique:\n"
FIRST, SECOND = HEADER + "Revised answer: The Eiffel Tower.", HEADER + "Revised answer: Big Ben."


@pytest.fixture(scope="module")
def embedder(embedder_factory) -> Embedder:
    return embedder_factory()  # the suite's loaded model, this module's cache


def test_cleaning_strips_headers_but_keeps_the_answer() -> None:
    assert clean_text(FIRST) == "The Eiffel Tower."
    assert clean_text("Final answer: Paris\nIt is in France.") == "Paris\nIt is in France."
    assert clean_text("The answer depends on the year.") == "The answer depends on the year."


def test_boilerplate_inflates_similarity_of_different_answers(embedder: Embedder) -> None:
    raw = embedder.encode([FIRST, SECOND])
    clean = embedder.encode([clean_text(FIRST), clean_text(SECOND)])
    sim_raw, sim_clean = 1 - cosine_distance(raw[0], raw[1]), 1 - cosine_distance(clean[0], clean[1])
    assert sim_raw > sim_clean + 0.3  # the header, not the answer, made them "similar"


def test_without_cleaning_the_semantic_stopper_halts_on_a_changed_answer(embedder: Embedder) -> None:
    def run(clean: bool) -> str | None:
        s = Stopper("sim_threshold@threshold=0.5", max_rounds=6, clean=clean, encode=embedder.encode)
        s.observe(FIRST)
        return s.observe(SECOND, "Wrong landmark; name the one in Paris.").reason

    assert run(clean=False) == "similar"  # a false convergence: the answer changed completely
    assert run(clean=True) is None  # cleaned, the change is seen and the loop continues
