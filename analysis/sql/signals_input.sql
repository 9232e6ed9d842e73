-- The round_signals table of connect_signals: the registered Arrow table of given per-round signals.
SELECT * FROM signals_input
