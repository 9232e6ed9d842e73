"""The analysis's one error: a store it cannot read as asked."""

from __future__ import annotations

from collections.abc import Mapping

from storage.parts import Store
from storage.verify import DamagedStore
from storage.verify import require_sound as _verify


class AnalysisError(ValueError):
    """A store the analysis cannot read as asked (says what and where).

    A message that tells which setting to change writes it as ``{judge}``, naming it in ``settings``: the text
    says ``judge=`` (``analysis.connect``'s argument), and a command says it with its own flag through
    :meth:`in_terms_of` (``shp-query``: ``--judge``)."""

    def __init__(self, message: str, *, settings: tuple[str, ...] = ()) -> None:
        self.template, self.settings = message, settings
        super().__init__(self.in_terms_of({}))

    def in_terms_of(self, flags: Mapping[str, str]) -> str:
        """The message with each setting named as ``flags`` says it (``name=`` where it has no entry)."""
        text = self.template
        for name in self.settings:
            text = text.replace("{" + name + "}", flags.get(name, f"{name}="))
        return text


def said_by(exc: BaseException, flags: Mapping[str, str]) -> str:
    """What a command prints for ``exc``: an AnalysisError in the command's own flags, anything else as is."""
    return exc.in_terms_of(flags) if isinstance(exc, AnalysisError) else str(exc)


def require_sound(store: Store) -> None:
    """Every part checked before it is believed (each once: storage.verify records sound parts); a damaged
    store is an AnalysisError naming each damaged part."""
    try:
        _verify(store)
    except DamagedStore as exc:
        raise AnalysisError(str(exc)) from None
