-- The price table of the connection (shp_ray.providers.prices, from the config or --prices): one row per provider
-- kind and model, US dollars per million tokens ('*': every model of the kind). A model without a row has no
-- price: its cost columns are NULL. Filled by analysis.replay.costs: nothing (its rows follow in rows_insert.sql).
CREATE OR REPLACE TEMP TABLE prices (
    provider_kind VARCHAR, model VARCHAR, input_per_mtok DOUBLE, output_per_mtok DOUBLE,
    cached_input_per_mtok DOUBLE, batch_discount DOUBLE, note VARCHAR
)
