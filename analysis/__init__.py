"""DuckDB over the store, in four rooms over one floor (ARCHITECTURE.md):

- :mod:`analysis.replay`: the replay engine (the connection, views, the replay SQL + UDFs, the policy table);
- :mod:`analysis.stats`: the statistics of a replay (paired tests, TOST, correctness, answer outcomes, the gain fit);
- :mod:`analysis.report`: the report folder (tables, figures, the HTML page);
- :mod:`analysis.query`: the ``shp-query`` CLI (read-only, bounded);
- the floor they share: :mod:`analysis.sql` (every statement, by name), :mod:`analysis.errors`.

import analysis
con = analysis.connect("runs/store")
con.sql("SELECT * FROM policy_summary").show()
"""

from analysis.replay.db import AnalysisError, connect, connect_signals, set_policies, setup_of, write_init_script
from analysis.replay.policy_table import default_policies, grid_policies
from analysis.replay.scope import ReplayScope
from analysis.sql import ScenarioSlice

__all__ = [
    "AnalysisError",
    "ReplayScope",
    "ScenarioSlice",
    "connect",
    "connect_signals",
    "default_policies",
    "grid_policies",
    "set_policies",
    "setup_of",
    "write_init_script",
]
