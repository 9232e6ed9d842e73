"""``shp-import``: trajectories a loop already produced, stored as a generation of kind ``imported``."""

from shp_ray.importer.ingest import ImportRequest, ImportResult, import_traces
from shp_ray.importer.traces import TraceError

__all__ = ["ImportRequest", "ImportResult", "TraceError", "import_traces"]
