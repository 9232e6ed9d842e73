"""Generation: the Writer -> Critic loop run for real, on Ray actors, into the store.

The loop and its prompts, the trajectory worker and service actors, the embedder,
the judge, records, progress and the guard that fails a broken endpoint fast.
It builds on :mod:`shp_ray.policy` (pure), :mod:`shp_ray.providers` and :mod:`storage`.
"""
