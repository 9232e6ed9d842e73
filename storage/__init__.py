"""The Parquet store shared by generation (writes) and the DuckDB replay (reads)."""

from storage.parts import Store, StoreError
from storage.schemas import EMBEDDING_DIM, TABLES, rounds_schema

__all__ = ["EMBEDDING_DIM", "TABLES", "Store", "StoreError", "rounds_schema"]
