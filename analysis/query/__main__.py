"""``python -m analysis.query``: the same as ``shp-query``."""

from analysis.query import entry

entry()
