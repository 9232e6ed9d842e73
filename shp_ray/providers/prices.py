"""What a provider's tokens cost: the price table, as data the user can override, and its lookup.

Prices are data, never logic: the default table is ``shp_ray/data/prices.yaml`` (its ``source`` and
``as_of`` say where its figures come from and when), the sweep's ``prices`` config group holds it (any
value overridable, or a table of your own), and ``shp-query`` / the report take ``--prices FILE``. The
DuckDB layer (``analysis.replay.costs``) prices each stored call with the entry of its generation's provider
kind and model.

An entry (:class:`ModelPrice`) is per million tokens: input, output, the cached-input price where a
provider sells one, and the Batch-API discount (a batch call costs the list price x (1 - discount)). A
model with no entry has no price -- never a silent $0: its cost columns are NULL and the report says so.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

WILDCARD = "*"  # a kind's entry for every model it serves (the embedded and simulated servers)
CURRENCY = "USD"  # every price is in US dollars: the cost columns are *_usd
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def default_prices_file() -> Path:
    """The price table shipped with the package (``shp_ray/data/prices.yaml``)."""
    return Path(str(resources.files("shp_ray") / "data" / "prices.yaml"))


def _price(where: str, value: Any, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: must be a finite number >= 0 (US dollars per million tokens), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ModelPrice:
    """One model's list prices, per million tokens."""

    input_per_mtok: float
    output_per_mtok: float
    # Where the provider sells cached input. Kept with the table; not applied yet: the store records
    # prompt tokens, not how many of them the provider served from its cache.
    cached_input_per_mtok: float | None = None
    batch_discount: float = 0.0  # the share the Batch API takes off: batch = list x (1 - batch_discount)
    note: str = ""  # where the figure comes from

    def check(self, where: str = "price") -> None:
        _price(f"{where}.input_per_mtok", self.input_per_mtok)
        _price(f"{where}.output_per_mtok", self.output_per_mtok)
        _price(f"{where}.cached_input_per_mtok", self.cached_input_per_mtok, optional=True)
        d = self.batch_discount
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not 0.0 <= d <= 1.0:
            raise ValueError(f"{where}.batch_discount: must be a share in [0, 1] (0.5 = half price), got {d!r}")


@dataclass(frozen=True)
class PriceTable:
    """Prices per provider kind and model in US dollars, with where they come from (``source``) and when
    (``as_of``)."""

    source: str
    as_of: str  # YYYY-MM-DD: the date the figures were read
    models: Mapping[str, Mapping[str, ModelPrice]] = field(default_factory=dict)  # kind -> model -> price

    def __post_init__(self) -> None:
        if not str(self.source).strip():
            raise ValueError("prices.source: say where the figures come from")
        if not _DATE.fullmatch(str(self.as_of)):
            raise ValueError(
                f"prices.as_of: must be a date YYYY-MM-DD (when the figures were read), got {self.as_of!r}"
            )
        for kind, entries in self.models.items():
            for model, price in entries.items():
                price.check(f"prices.models.{kind}.{model}")

    def lookup(self, kind: str | None, model: str | None) -> ModelPrice | None:
        """The price of ``model`` served by a provider of ``kind``: its own entry, else the kind's ``*``;
        None when the table has neither (the cost is unknown, not zero)."""
        if kind is None or model is None:
            return None
        entries = self.models.get(kind, {})
        return entries.get(model, entries.get(WILDCARD))

    def entries(self) -> list[tuple[str, str, ModelPrice]]:
        """(kind, model, price) of every entry, sorted."""
        return sorted(((k, m, p) for k, ms in self.models.items() for m, p in ms.items()), key=lambda e: e[:2])

    def describe(self) -> str:
        """One line naming the table: what the report and the sweep print under their cost columns."""
        return f"prices: {' '.join(self.source.split())} (as of {self.as_of}, {CURRENCY} per million tokens)"


_PRICE_KEYS = {f.name for f in fields(ModelPrice)}
_TABLE_KEYS = {"source", "as_of", "models"}


def price_table(data: Mapping[str, Any]) -> PriceTable:
    """A :class:`PriceTable` from plain data (a YAML file, the sweep's ``prices`` config); a wrong key or
    value raises ValueError naming it (``prices.models.openai.gpt-4o.input_per_mtok: ...``)."""
    unknown = set(data) - _TABLE_KEYS
    if unknown:
        raise ValueError(
            f"prices: unknown key{'s' if len(unknown) > 1 else ''} {sorted(unknown)} (known: {sorted(_TABLE_KEYS)})"
        )
    models: dict[str, dict[str, ModelPrice]] = {}
    for kind, entries in (data.get("models") or {}).items():
        if not isinstance(entries, Mapping):
            raise ValueError(f"prices.models.{kind}: must map model names to prices, got {entries!r}")
        for model, entry in entries.items():
            where = f"prices.models.{kind}.{model}"
            if not isinstance(entry, Mapping):
                raise ValueError(f"{where}: must be a mapping of {sorted(_PRICE_KEYS)}, got {entry!r}")
            bad = set(entry) - _PRICE_KEYS
            if bad:
                raise ValueError(
                    f"{where}: unknown key{'s' if len(bad) > 1 else ''} {sorted(bad)} (known: {sorted(_PRICE_KEYS)})"
                )
            for key in ("input_per_mtok", "output_per_mtok"):
                if entry.get(key) is None:
                    raise ValueError(f"{where}.{key}: required (US dollars per million tokens)")
            models.setdefault(str(kind), {})[str(model)] = ModelPrice(
                **{k: v for k, v in entry.items() if v is not None}
            )
    return PriceTable(
        source=str(data.get("source") or ""),
        as_of=str(data.get("as_of") or ""),
        models=models,
    )


def load_prices(path: str | Path) -> PriceTable:
    """The price table in a YAML file of ``shp_ray/data/prices.yaml``'s shape."""
    text = Path(path).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: a price table is a mapping with {sorted(_TABLE_KEYS)}")
    try:
        return price_table(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


@functools.cache
def default_prices() -> PriceTable:
    """The shipped table (read once per process)."""
    return load_prices(default_prices_file())
