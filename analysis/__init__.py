"""DuckDB over the store: views, replay SQL + UDFs, statistics, report, the query CLI."""
