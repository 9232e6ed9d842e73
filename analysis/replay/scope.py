"""What one replay reads and how it is judged: the replay scope that :func:`analysis.connect`, the report and a
sweep job pass around as one value instead of the same eight keywords each.

    scope = ReplayScope(store, judge="gpt-judge", gen_id=gen, scenario_ids=ids)
    con = analysis.connect(scope)
    write_report(scope, "out/")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path

from analysis.errors import AnalysisError
from analysis.replay.policy_table import default_policies
from analysis.sql import ScenarioSlice
from shp_ray.policy import weights as weight_strategies
from shp_ray.policy.scoring import DEFAULT_DELTA, check_weights
from shp_ray.policy.table import Policy
from shp_ray.providers.prices import PriceTable, default_prices
from storage.parts import NoStore, Store, open_store


def open_for_reading(store: Store) -> Store:
    """The store, for reading (an object store: credentials, endpoint and bucket checked first); a root that
    holds no store is refused in one line, nothing created."""
    if store._listing is not None:  # listed already: a snapshot, or one bucket of it
        return store
    try:
        return open_store(store)
    except NoStore as exc:
        raise AnalysisError(str(exc)) from None


def resolve_weights(weights: Mapping[str, float] | str | None) -> dict[str, float]:
    if weights is None or weights == "uniform":
        return weight_strategies.uniform()
    if isinstance(weights, str):
        raise AnalysisError(f"weights {weights!r}: pass a dict metric -> weight (see shp_ray.policy.weights)")
    return dict(weights)


@dataclass(frozen=True)
class ReplayScope:
    """The store and what of it is replayed: which generation (``gen_id``) and scenarios (``scenario_ids``: a
    split's ids, or a :class:`ScenarioSlice` of a store too large for memory), whose judgments give IS
    (``judge``, ``judge_prompt_version``: needed only when the store holds several), the metric ``weights``
    (default uniform), the ``policies`` (default: every standard policy and the ablation cells), the
    non-inferiority margin ``delta``, the ``prices`` of the cost columns (default: the shipped table) and the
    ``memory_limit`` of DuckDB (e.g. ``"1.5GB"``: past it, it spills to disk).

    ``store`` may be given as a path or URI: it becomes a :class:`Store` once, here (checked to hold a store
    when it is read: :func:`open_for_reading`).
    """

    store: Store
    _: KW_ONLY  # the rest by name: three optional strings and a mapping in a row invite a silent mix-up
    judge: str | None = None
    judge_prompt_version: str | None = None
    weights: Mapping[str, float] | str | None = None
    policies: Iterable[Policy] | None = None
    delta: float = DEFAULT_DELTA
    prices: PriceTable | None = None
    gen_id: str | None = None
    scenario_ids: Sequence[str] | ScenarioSlice | None = None
    memory_limit: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.store, Store):
            object.__setattr__(self, "store", Store(self.store))
        if self.policies is not None and not isinstance(self.policies, tuple):
            object.__setattr__(self, "policies", tuple(self.policies))

    def resolved(self) -> ReplayScope:
        """The scope with its defaults filled in: weights checked, the policies and the price table named."""
        return replace(
            self,
            weights=check_weights(resolve_weights(self.weights)),
            policies=tuple(default_policies() if self.policies is None else self.policies),
            prices=default_prices() if self.prices is None else self.prices,
        )

    def settled(self) -> tuple[Mapping[str, float], tuple[Policy, ...], PriceTable]:
        """The weights, policies and prices of a :meth:`resolved` scope, typed as what resolving made them."""
        weights, policies, prices = self.weights, self.policies, self.prices
        if not isinstance(weights, Mapping) or not isinstance(policies, tuple) or prices is None:
            raise TypeError("the scope is not resolved: call .resolved() first")
        return weights, policies, prices


def scope_of(
    store: str | Path | Store | ReplayScope,
    judge: str | None = None,
    weights: Mapping[str, float] | str | None = None,
    policies: Iterable[Policy] | None = None,
) -> ReplayScope:
    """``store`` as a scope: a :class:`ReplayScope` as given, else the store with these three (the short form
    ``connect(store, judge=..., policies=...)``); both at once is refused (say them in the scope)."""
    if not isinstance(store, ReplayScope):
        return ReplayScope(
            Store(store) if isinstance(store, (str, Path)) else store, judge=judge, weights=weights, policies=policies
        )
    if judge is not None or weights is not None or policies is not None:
        raise AnalysisError("judge, weights and policies go in the ReplayScope when one is given")
    return store
