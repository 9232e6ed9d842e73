"""The replay engine: DuckDB over a store, its views, and every policy replayed as SQL + UDFs.

``analysis.connect`` (:mod:`analysis.replay.db`) opens a store through its sources, builds the views
(:mod:`~analysis.replay.views`, the statements; :mod:`~analysis.replay.signals`, the replay over given signals),
keeps what opening computes (:mod:`~analysis.replay.derived`, :mod:`~analysis.replay.stored_inputs`) and
replays the stopping families column-wise (:mod:`~analysis.replay.family_replay`) or on Ray
(:mod:`~analysis.replay.ray_replay`).
It imports only the floor of analysis (:mod:`analysis.sql`, :mod:`analysis.errors`); the statistics, the report and
the query CLI build on it (ARCHITECTURE.md).
"""
