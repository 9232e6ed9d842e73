"""RESULTS.md read as its rendered sections: each starts at its `## ` heading and runs to the next one (or the end)."""

from __future__ import annotations


def results_section(text: str, heading: str) -> str:
    """The section of ``text`` that starts with ``heading``, up to the next `## ` heading, ending in one newline (as
    a renderer returns it)."""
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : len(text) if end < 0 else end].rstrip("\n") + "\n"
