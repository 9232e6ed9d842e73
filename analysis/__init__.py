"""DuckDB over the store: views, replay SQL + UDFs, statistics, report, the query CLI.

import analysis
con = analysis.connect("runs/store")
con.sql("SELECT * FROM policy_summary").show()
"""

from analysis.db import AnalysisError, connect, connect_signals, set_policies, setup_of, write_init_script
from analysis.policy_table import default_policies, grid_policies
from analysis.scope import ReplayScope
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
