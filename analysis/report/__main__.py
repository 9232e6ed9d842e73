"""``python -m analysis.report --store DIR --out DIR``: a store's report folder (report.md, figures, CSV, HTML)."""

import sys

from analysis.report import main

sys.exit(main())
