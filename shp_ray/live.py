"""``shp_ray.Stopper``: the policy package's live Stopper with the project's embedder as its default.

The policy package is pure (no model, no I/O); this is where the live library API
meets the real sentence embedder, loaded on the first draft that needs it.
"""

from __future__ import annotations

from shp_ray.policy import stopper


class Stopper(stopper.Stopper):
    __doc__ = stopper.Stopper.__doc__

    def default_encoder(self) -> stopper.Encode:
        from shp_ray.generation.embedder import Embedder  # torch + the model: only when a draft arrives

        return Embedder().encode
