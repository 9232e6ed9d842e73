"""Embed each stored critique once, for the ``consensus`` and ``gain_model`` families.

Generation embeds drafts only. This pass reads the critiques f_t of a store's
rounds, embeds the texts not yet in ``feedback_embeddings`` for this embedder
(keyed by sha256 of the text, so a repeated critique is embedded once), and
writes them as ONE new part. Old stores need nothing else: without the table
the families see no critique embedding (consensus = the draft alone).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shp_ray.generation.embedder import Embedder, text_hash
from storage.parts import Store
from storage.schemas import feedback_embeddings_schema


def embed_feedback(store: Store, embedder: Embedder, gen_ids: list[str] | None = None) -> int:
    """Embed the critiques of generations made with ``embedder``; returns how many texts were new."""
    gens = store.read("generations", columns=["gen_id", "embedder"]).to_pylist()
    mine = {g["gen_id"] for g in gens if g["embedder"] == embedder.name}
    if gen_ids is not None:
        mine &= set(gen_ids)
    if not mine:
        return 0
    rounds = store.read("rounds", columns=["gen_id", "feedback"])
    rounds = rounds.filter(pc.is_in(rounds["gen_id"], pa.array(sorted(mine))))
    have = store.read("feedback_embeddings", columns=["embedder", "text_hash"]).to_pylist()
    done = {r["text_hash"] for r in have if r["embedder"] == embedder.name}
    todo: dict[str, str] = {}
    for text in rounds["feedback"].to_pylist():
        if text and text.strip():
            h = text_hash(text)
            if h not in done:
                todo.setdefault(h, text)
    if not todo:
        return 0
    vecs = embedder.encode(list(todo.values()))
    dim = vecs.shape[1]
    table = pa.table(
        {
            "embedder": [embedder.name] * len(todo),
            "text_hash": list(todo),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vecs.astype(np.float32).ravel()), dim),
        }
    )
    store.write("feedback_embeddings", table, schema=feedback_embeddings_schema(dim))
    return len(todo)
