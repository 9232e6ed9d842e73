"""``shp-sweep`` and its helpers.

Importing this package first binds the name ``conf`` to the project's own config package, found by its
location beside this one: a folder ``conf/`` of the user's (Hydra's customary name for a config folder) on
``PYTHONPATH`` is a namespace package to Python, and an editable install's finder, consulted after the path,
loses to it -- the app would then read the user's folder as its schema ("Primary config module 'conf' not
found"). The user's folder stays theirs: it is read as a config folder (``--config-dir``), never imported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _own_conf() -> None:
    here = Path(__file__).resolve().parent.parent / "conf"
    loaded = sys.modules.get("conf")
    if loaded is not None and Path(getattr(loaded, "__file__", None) or "/").resolve().parent == here:
        return
    spec = importlib.util.spec_from_file_location("conf", here / "__init__.py", submodule_search_locations=[str(here)])
    assert spec is not None and spec.loader is not None, here
    module = importlib.util.module_from_spec(spec)
    sys.modules["conf"] = module
    for name in [n for n in sys.modules if n.startswith("conf.")]:  # submodules of a folder taken for it
        del sys.modules[name]
    spec.loader.exec_module(module)


_own_conf()
